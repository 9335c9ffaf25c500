"""Deciding what gets answered, and handing it over: the one place every update goes through.

An update is a message, a press on a settings button, or a change of the bot's own membership of a chat (removed
from a group, blocked by a user: that chat's schedules are dropped, ``extensions.chat.reminders``). A message is
counted, checked against the updates seen lately (Telegram delivers again what it was not told it got), then against
the chat's reply policy and the allowlists (``filters``), and becomes a ``Decision``: help, reset, forget, a settings
command, or an answer.

Embedded, the answer runs in a task the adapter owns (returned: the poller confirms the update once it ends), with
"typing..." shown and ``TELEGRAM_MAX_CONCURRENT`` answers at most at a time; a full inbox gets the busy notice. In
front of a queue (``bots gateway``), the message is stored in its chat's inbox before ``take`` returns, so Telegram
is told it was received only then; a message for a full inbox waits for room or is dropped with the busy notice
(``extensions.chat.backpressure``) while the other chats go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from telegram import Update
from telegram.ext import ContextTypes

from core import tracing
from core.entries import InputRef
from core.errors import DispatchError, MemoryStoreError
from core.trace import correlation_id
from core.trust import TIER_PARAM, Tier

from ..chat.adapter import ChatAdapter
from ..chat.backpressure import Incoming
from ..chat.counters import Ignored
from ..chat.policy import Allowlist, ReplyPolicy
from ..chat.reminders import drop_conversation
from .bot_commands import BotCommands
from .definitions import MESSAGE, ChatArgs, telegram_chat
from .filters import Decision, MessageFacts, decide, ignore_reason
from .poller import until_stored
from .posting import Posting
from .settings import TelegramSettings

if TYPE_CHECKING:
    from core.definitions import Send

    from .approvals import TelegramApprovals

__all__ = ("BotIdentity", "Listener", "input_of")

log = logging.getLogger("extensions.telegram")
content_log = logging.getLogger("content.telegram")
"""Message text, silent unless the operator opts in (``LOG_CONTENT``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BotIdentity:
    """Who the bot is (from ``getMe``): mentions and commands addressed to it are recognised by these."""

    id: int
    """The bot's user id (a reply to one of its messages is addressed to it)."""
    username: str
    """Its username, without the ``@`` (``@name`` mentions, ``/command@name``)."""
    name: str
    """Its first name (in the help text)."""


def input_of(facts: MessageFacts, *, tier: Tier | None = None) -> InputRef:
    """The agent's input for a user's message, with its author's ``tier`` when known (``core.trust``)."""
    params = {"user": facts.user_name, "user_id": str(facts.user_id), "message_id": str(facts.message_id)}
    if facts.username:
        params["username"] = facts.username
    if tier is not None:
        params[TIER_PARAM] = tier.value
    return InputRef(type=MESSAGE, data=facts.text, params=params, attachments=list(facts.attachments))


class Listener:
    """Decides on each update of one bot and hands over what is answered (``open`` gives it ``agent.send``)."""

    def __init__(
        self,
        adapter: ChatAdapter,
        settings: TelegramSettings,
        *,
        me: BotIdentity,
        queued: bool,
        allowlist: Allowlist,
        commands: BotCommands,
        posting: Posting,
    ) -> None:
        self.adapter = adapter
        """Dedupe, metrics, tasks, backpressure and the chats' settings."""
        self.settings = settings
        self.me = me
        self.queued = queued
        """In front of a queue: a message is stored before ``take`` returns."""
        self.allowlist = allowlist
        self.commands = commands
        self.posting = posting
        self.approvals: TelegramApprovals | None = None
        """Presses on approval buttons (``core.approvals``), when the agent has approvals."""
        self._send: Send | None = None
        self._slots = asyncio.Semaphore(settings.max_concurrent)

    def open(self, send: Send) -> None:
        """Hand answered messages to ``send`` (``agent.send``) from now on."""
        self._send = send

    async def on_update(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        """PTB's handler (updates from PTB's ``Updater``): see ``take``."""
        await self.take(update, retry=True)

    async def take(self, update: Update, *, retry: bool) -> Awaitable[None] | None:
        """``_take`` in the span of the update's trace (``core.tracing``; nothing while tracing is off)."""
        with tracing.span("telegram update", kind="server") as span:
            if span.is_recording():
                span.set_attributes({"messaging.system": "telegram", "bots.update.id": update.update_id})
                if update.effective_chat is not None:
                    span.set_attribute("bots.chat.id", tracing.ident(update.effective_chat.id))
                if update.effective_user is not None:
                    span.set_attribute("user.id", tracing.ident(update.effective_user.id))
            return await self._take(update, retry=retry)

    async def _membership(self, update: Update) -> None:
        """The bot's own membership of a chat changed: once it was removed from a group or blocked by the user of
        a private chat (``kicked``, ``left``), the chat's schedules are dropped (Telegram said it may not post)."""
        change, agent = update.my_chat_member, self.adapter.agent
        if change is None or agent is None:
            return
        status = change.new_chat_member.status
        if status in ("kicked", "left"):
            cid = agent.context_id(telegram_chat, ChatArgs(chat_id=change.chat.id))
            await drop_conversation(agent, cid, f"Telegram says the bot's membership is now {status}")

    async def _take(self, update: Update, *, retry: bool) -> Awaitable[None] | None:
        """Decide on ``update``. Embedded: answer in an owned task, returned (the poller confirms the update once
        it ends). In front of a queue: return None only once the update is handled (stored in Redis, answered here,
        or dropped on purpose); a message for a full inbox is kept waiting or dropped with the busy notice
        (``REDIS_INBOX_FULL``), so the other chats go on. Without ``retry`` (the webhook server), a failure to store
        (``DispatchError``, ``MemoryStoreError``, a full inbox) is raised: Telegram delivers the update again."""
        if update.callback_query is not None:
            if self.approvals is not None and await self.approvals.on_press(update.callback_query):
                return None
            await self.commands.on_choice(update.callback_query)
            return None
        if update.my_chat_member is not None:
            await self._membership(update)
            return None
        message = update.message
        if message is None:
            return None
        adapter = self.adapter
        facts = MessageFacts.of(message, bot_id=self.me.id, bot_username=self.me.username)
        args = facts.args
        adapter.metrics.received(telegram_chat, args)
        update_id = str(update.update_id)
        if update_id in adapter.seen:
            log.info("update %s was delivered twice; answering it once", update.update_id)
            adapter.metrics.ignored(telegram_chat, args, Ignored.DUPLICATE)
            return None
        queued = self.queued
        if not queued:
            adapter.seen.add(update_id)
        policy = await self._reply_policy(facts)
        bots = facts.from_bot and adapter.trust.allows_bot("telegram", facts.user_id or 0, facts.username)
        reason = ignore_reason(facts, policy=policy, allowlist=self.allowlist, bots=bots)
        if reason is None and facts.from_bot and not adapter.bot_exchanges.take((facts.chat_id, facts.thread_id)):
            log.warning("chat %s: bot %s not answered: TRUST_BOT_REPLIES reached", facts.chat_id, facts.user_id)
            reason = Ignored.BOT_CAP
        if reason is not None:
            adapter.metrics.ignored(telegram_chat, args, reason)
            return None
        decision = decide(facts, policy=policy, allowlist=self.allowlist, bots=bots)
        tier = await self._tier(facts) if decision is Decision.ANSWER else None
        content_log.info("chat %s message %s from %s: %s", facts.chat_id, facts.message_id, facts.user_id, facts.text)
        log.info(
            "chat %s%s: %s from user %s (message %s, %d characters)",
            facts.chat_id,
            f"/{facts.thread_id}" if facts.thread_id is not None else "",
            decision.value,
            facts.user_id,
            facts.message_id,
            len(facts.text),
        )
        key = f"telegram:{update.update_id}"
        work = self._respond(decision, facts, key, tier)
        if not queued:
            return adapter.spawn(work(), name=f"{key}:{decision.value}", key=key)
        what = f"message {facts.message_id} in chat {facts.chat_id}"
        token = correlation_id.set(key)
        try:
            if retry:
                incoming = Incoming(
                    chat=(facts.chat_id, facts.thread_id),
                    key=key,
                    what=what,
                    store=work,
                    tell_busy=lambda: self.posting.say(facts, "busy"),
                    on_dropped=lambda: adapter.metrics.ignored(telegram_chat, args, Ignored.BUSY),
                    on_handled=lambda: adapter.seen.add(update_id),
                )
                await until_stored(lambda: adapter.backpressure.submit(incoming), what=what, full=False)
                return None  # marked seen once stored or dropped (``on_handled``)
            await work()
        except (DispatchError, MemoryStoreError):
            raise  # not stored (only without ``retry``): Telegram delivers the update again
        except Exception:
            log.exception("could not answer message %s in chat %s", facts.message_id, facts.chat_id)
            await self.posting.say(facts, "run_failed")
        finally:
            correlation_id.reset(token)
        adapter.seen.add(update_id)  # only now: an update given up half way by a stop is fetched again
        return None

    async def _reply_policy(self, facts: MessageFacts) -> ReplyPolicy:
        """When the bot answers in the group of ``facts``: its own choice (``/reply``) over
        ``TELEGRAM_REPLY_POLICY`` (read from the store at each message, so a change applies at once)."""
        default = self.settings.reply_policy
        if facts.private or facts.from_bot:
            return default
        return await self.adapter.reply_policy(telegram_chat, facts.args, default)

    async def _tier(self, facts: MessageFacts) -> Tier:
        """The tier of the message's author (``TRUST_*``): in a group, its administrators (getChatAdministrators,
        kept a while) are admins, and so is an administrator writing as the group."""
        rules = self.adapter.trust
        admin = facts.anonymous_admin
        user = facts.user_id
        asked = not (admin or facts.private or facts.from_bot or user is None or f"telegram:{user}" in rules.owners)
        if asked and rules.chat_admins:
            admins = await self.commands.chat_admins(facts.chat_id)
            admin = admins is not None and str(user) in admins
        return rules.tier("telegram", facts.user_id, is_bot=facts.from_bot, admin=admin)

    def _respond(
        self, decision: Decision, facts: MessageFacts, key: str, tier: Tier | None = None
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        """What answers ``decision``: the help text, a reset, or the message handed to the agent (stored
        in its chat's inbox, in front of a queue)."""
        commands = self.commands
        if decision is Decision.HELP:
            return lambda: commands.help(facts, bot_name=self.me.name)
        if facts.command in self.adapter.disabled_commands() and decision in (Decision.RESET, Decision.FORGET):
            return lambda: self.posting.say(facts, "disabled", command=facts.command or "")
        if decision is Decision.RESET:
            return lambda: commands.reset(facts)
        if decision is Decision.FORGET:
            return lambda: commands.reset(facts, erase=True)
        if decision is Decision.SETTINGS:
            return lambda: commands.settings_command(facts)
        assert self._send is not None
        send, args, ref = self._send, facts.args, input_of(facts, tier=tier)

        async def store() -> None:  # embedded: returns once answered; queued: once stored (or a redelivery dropped)
            await send(telegram_chat, args, ref, dedupe_key=key)

        if self.queued:
            return store
        return lambda: self._answer(facts, key, store)

    async def _answer(self, facts: MessageFacts, key: str, store: Callable[[], Awaitable[None]]) -> None:
        """Hand the message to the agent, with "typing..." shown until the run is over."""
        incoming = Incoming(
            chat=(facts.chat_id, facts.thread_id),
            key=key,
            what=f"message {facts.message_id} in chat {facts.chat_id}",
            store=store,
            tell_busy=lambda: self.posting.say(facts, "busy"),
            tell_failed=lambda: self.posting.say(facts, "run_failed"),
        )
        async with self._slots, self.posting.typing(facts.chat_id, facts.thread_id):
            await self.adapter.run_here(incoming, context=telegram_chat, args=facts.args)
