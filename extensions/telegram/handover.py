"""Handing a message over once its verdict is taken (``filters``): to the agent as its input, or to the bot's own
commands (help, reset, forget, a settings command).

Embedded, the answer runs in a task the adapter owns (returned: the poller confirms the update once it ends), with
"typing..." shown and ``TELEGRAM_MAX_CONCURRENT`` answers at most at a time; a full inbox gets the busy notice. In
front of a queue (``bots gateway``), the message is stored in its chat's inbox before ``hand`` returns, so Telegram
is told it was received only then; a message for a full inbox waits for room or is dropped with the busy notice
(``extensions.chat.backpressure``) while the other chats go on. The update is marked seen (``ChatAdapter.seen``)
only once it is handled, so one given up half way by a stop is fetched again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from core.entries import InputRef
from core.errors import DispatchError, MemoryStoreError
from core.trace import correlation_id
from core.trust import TIER_PARAM

from ..chat.adapter import ChatAdapter
from ..chat.backpressure import Incoming
from ..chat.counters import Ignored
from .bot_commands import BotCommands
from .definitions import MESSAGE, telegram_chat
from .filters import Decision, MessageFacts, Verdict
from .poller import until_stored
from .posting import Posting

if TYPE_CHECKING:
    from core.definitions import Send
    from core.trust import Tier

__all__ = ("Handover", "input_of")

log = logging.getLogger("extensions.telegram")


def input_of(facts: MessageFacts, *, tier: Tier | None = None) -> InputRef:
    """The agent's input for a user's message, with its author's ``tier`` when known (``core.trust``)."""
    params = {"user": facts.user_name, "user_id": str(facts.user_id), "message_id": str(facts.message_id)}
    if facts.username:
        params["username"] = facts.username
    if tier is not None:
        params[TIER_PARAM] = tier.value
    hidden = ["user_id"] if facts.private else []  # (a private chat is one person's: its id tells nobody apart)
    return InputRef(type=MESSAGE, data=facts.text, params=params, hidden=hidden, attachments=list(facts.attachments))


class Handover:
    """Hands the messages of one bot over (``open`` gives it ``agent.send``)."""

    def __init__(
        self,
        adapter: ChatAdapter,
        *,
        queued: bool,
        max_concurrent: int,
        commands: BotCommands,
        posting: Posting,
        bot_name: str,
    ) -> None:
        self.adapter = adapter
        """Tasks, backpressure, dedupe and metrics; the commands turned off."""
        self.queued = queued
        """In front of a queue: a message is stored before ``hand`` returns."""
        self.commands = commands
        self.posting = posting
        self.bot_name = bot_name
        """The bot's first name (in the help text)."""
        self._send: Send | None = None
        self._slots = asyncio.Semaphore(max_concurrent)

    def open(self, send: Send) -> None:
        """Hand answered messages to ``send`` (``agent.send``) from now on."""
        self._send = send

    @property
    def sender(self) -> Send | None:
        """What inputs are handed to (``agent.send``), once open."""
        return self._send

    async def hand(
        self, verdict: Verdict, facts: MessageFacts, *, update_id: int, retry: bool
    ) -> Awaitable[None] | None:
        """Hand over the message of ``facts`` (from the update ``update_id``), as ``verdict`` says. Embedded: in an
        owned task, returned. In front of a queue: return None only once the message is handled (stored in Redis,
        answered here, or dropped on purpose); a message for a full inbox is kept waiting or dropped with the busy
        notice (``REDIS_INBOX_FULL``), so the other chats go on. Without ``retry`` (the webhook server), a failure
        to store (``DispatchError``, ``MemoryStoreError``, a full inbox) is raised: Telegram delivers the update
        again."""
        adapter, seen = self.adapter, str(update_id)
        key = f"telegram:{update_id}"
        work = self._respond(verdict, facts, key)
        if not self.queued:
            return adapter.spawn(work(), name=f"{key}:{verdict.decision.value}", key=key)
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
                    on_dropped=lambda: adapter.metrics.ignored(telegram_chat, facts.args, Ignored.BUSY),
                    on_handled=lambda: adapter.seen.add(seen),
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
        adapter.seen.add(seen)  # only now: an update given up half way by a stop is fetched again
        return None

    def _respond(self, verdict: Verdict, facts: MessageFacts, key: str) -> Callable[[], Coroutine[Any, Any, None]]:
        """What answers the message: the agent, given it as its input (stored in its chat's inbox, in front of a
        queue), or one of the bot's commands (a reset or a forget the operator turned off is told so)."""
        decision = verdict.decision
        if decision is Decision.ANSWER:
            assert self._send is not None
            send, args, ref = self._send, facts.args, input_of(facts, tier=verdict.tier)

            async def store() -> None:  # embedded: returns once answered; queued: once stored (or a redelivery dropped)
                await send(telegram_chat, args, ref, dedupe_key=key)

            if self.queued:
                return store
            return lambda: self._answer(facts, key, store)
        commands = self.commands
        if decision is Decision.HELP:
            return lambda: commands.help(facts, bot_name=self.bot_name)
        if facts.command in self.adapter.disabled_commands() and decision in (Decision.RESET, Decision.FORGET):
            return lambda: self.posting.say(facts, "disabled", command=facts.command or "")
        if decision is Decision.RESET:
            return lambda: commands.reset(facts)
        if decision is Decision.FORGET:
            return lambda: commands.reset(facts, erase=True)
        return lambda: commands.settings_command(facts)  # Decision.SETTINGS

    async def _answer(self, facts: MessageFacts, key: str, store: Callable[[], Awaitable[None]]) -> None:
        """Embedded: hand the message to the agent, with "typing..." shown until the run is over."""
        incoming = Incoming(
            chat=(facts.chat_id, facts.thread_id),
            key=key,
            what=f"message {facts.message_id} in chat {facts.chat_id}",
            store=store,
            tell_busy=lambda: self.posting.say(facts, "busy"),
            tell_failed=lambda: self.posting.say(facts, "run_failed"),
        )
        async with (
            self._slots,
            self.posting.typing(facts.chat_id, facts.thread_id, business=facts.business_connection_id),
        ):
            await self.adapter.run_here(incoming, context=telegram_chat, args=facts.args)
