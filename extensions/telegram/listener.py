"""The one place every update goes through: routed by what it is, and for a message, decided on.

An update is a change of the bot's own membership of a chat (removed from a group, blocked by a user: that chat's
schedules are dropped, ``extensions.chat.reminders``), a press on one of the bot's inline buttons (Approve or Deny
of an approval, to ``approvals``; a choice of a command's answer, to ``bot_commands``), a Telegram Business account
connecting the bot (``business``), a change of a checklist's tasks (``checklists``), or a message (in the bot's
own chats, or in a business account's, answered on its behalf). A message is
counted, checked against the updates seen lately (Telegram delivers again what it was not told it got), given its
verdict (``filters``: the reply policy, the allowlists, what it asks for, its author's tier) and, unless it is
ignored, handed over (``handover``: to the agent, or to the bot's commands; embedded or in front of a queue).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from telegram import CallbackQuery, ChatMemberUpdated, Update
from telegram.ext import ContextTypes

from core import tracing

from ..chat.adapter import ChatAdapter
from ..chat.approvals import PREFIX as APPROVAL_PREFIX
from ..chat.counters import Ignored
from ..chat.reminders import drop_conversation
from .approvals import TelegramApprovals
from .bot_commands import CHOICE_PREFIX, BotCommands
from .business import BusinessConnections
from .checklists import is_checklist_change, on_checklist_change
from .definitions import ChatArgs, telegram_chat
from .filters import Judge, MessageFacts
from .guest_answer import on_guest_message
from .handover import Handover
from .polls import on_poll_answer, on_reaction

if TYPE_CHECKING:
    from core.definitions import Send

__all__ = ("BotIdentity", "Listener")

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


class Listener:
    """Routes each update of one bot, and decides on its messages (``open`` gives the hand-over ``agent.send``)."""

    def __init__(
        self,
        adapter: ChatAdapter,
        *,
        me: BotIdentity,
        queued: bool,
        judge: Judge,
        handover: Handover,
        approvals: TelegramApprovals,
        commands: BotCommands,
        business: BusinessConnections,
        guest_mode: bool = False,
    ) -> None:
        self.adapter = adapter
        self.business = business
        """The Telegram Business connections: whose messages in a business account's chats are answered."""
        self.guest_mode = guest_mode
        """Answer guest requests (``TELEGRAM_GUEST_MODE``)."""
        """Dedupe and metrics; the agent whose schedules a chat that is gone loses."""
        self.me = me
        self.queued = queued
        """In front of a queue: a message is marked seen only once the hand-over stored it."""
        self.judge = judge
        """The verdict on a message."""
        self.handover = handover
        """What a message that is not ignored is handed to."""
        self.approvals = approvals
        """Presses on approval buttons (``core.approvals``)."""
        self.commands = commands
        """Presses on the buttons of a command's answer."""

    def open(self, send: Send) -> None:
        """Hand answered messages to ``send`` (``agent.send``) from now on."""
        self.handover.open(send)

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

    async def _take(self, update: Update, *, retry: bool) -> Awaitable[None] | None:
        """Route ``update``; for a message, decide on it and hand it over (``Handover.hand``: what is returned,
        and what ``retry`` means)."""
        if update.my_chat_member is not None:
            await self._membership(update.my_chat_member)
            return None
        if update.callback_query is not None:
            await self._press(update.callback_query)
            return None
        if update.message_reaction is not None:  # feedback on an answer: recorded, never answered
            await on_reaction(self.adapter, self.handover.posting.answers, update.message_reaction)
            return None
        if update.guest_message is not None:  # guest mode (TELEGRAM_GUEST_MODE): the request alone, kept by nothing
            guest = on_guest_message(
                self.adapter,
                update.guest_message,
                enabled=self.guest_mode,
                bot_username=self.me.username,
                send=self.handover.sender,
                update_id=update.update_id,
                allowlist=self.judge.allowlist,
            )
            return await self._hand_off(guest, update_id=update.update_id, what="guest")
        if update.poll_answer is not None:  # a vote in one of the bot's polls: an input of its conversation
            vote = on_poll_answer(
                self.adapter,
                self.handover.posting.polls,
                update.poll_answer,
                send=self.handover.sender,
                update_id=update.update_id,
                allowlist=self.judge.allowlist,
            )
            return await self._hand_off(vote, update_id=update.update_id, what="poll_answer")
        if update.business_connection is not None:  # a Telegram Business account connected the bot, or changed it
            self.business.learn(update.business_connection)
            return None
        stopped = update.api_kwargs.get("stopped_message_generation")  # (Bot API 10.3: PTB 22.8 has no type)
        if isinstance(stopped, dict):
            await self.commands.on_draft_stopped(stopped)
            return None
        message = update.message or update.business_message  # (a business account's chat: answered on its behalf)
        if message is None:
            return None
        if is_checklist_change(message):  # tasks marked done or added: an input of the chat's conversation
            change = on_checklist_change(
                self.adapter,
                message,
                send=self.handover.sender,
                update_id=update.update_id,
                allowlist=self.judge.allowlist,
            )
            return await self._hand_off(change, update_id=update.update_id, what="checklist")
        adapter = self.adapter
        facts = MessageFacts.of(message, bot_id=self.me.id, bot_username=self.me.username)
        adapter.metrics.received(telegram_chat, facts.args)
        if update.business_message is not None:
            reason = await self.business.ignored(message)  # the account owner's or the bot's own, a connection off
            if reason is not None:
                adapter.metrics.ignored(telegram_chat, facts.args, reason)
                return None
        update_id = str(update.update_id)
        if update_id in adapter.seen:
            log.info("update %s was delivered twice; answering it once", update.update_id)
            adapter.metrics.ignored(telegram_chat, facts.args, Ignored.DUPLICATE)
            return None
        if not self.queued:
            adapter.seen.add(update_id)
        verdict = await self.judge.verdict_on(facts)
        if verdict.ignored is not None:
            adapter.metrics.ignored(telegram_chat, facts.args, verdict.ignored)
            return None
        content_log.info("chat %s message %s from %s: %s", facts.chat_id, facts.message_id, facts.user_id, facts.text)
        log.info(
            "chat %s%s: %s from user %s (message %s, %d characters)",
            facts.chat_id,
            f"/{facts.thread_id}" if facts.thread_id is not None else "",
            verdict.decision.value,
            facts.user_id,
            facts.message_id,
            len(facts.text),
        )
        return await self.handover.hand(verdict, facts, update_id=update.update_id, retry=retry)

    async def _hand_off(
        self, handing: Coroutine[Any, Any, None], *, update_id: int, what: str
    ) -> Awaitable[None] | None:
        """Hand an input that is not a message (a guest request, a vote, a checklist's change) to its conversation: in
        front of a queue, stored before the update is confirmed; embedded, in the background (the returned task), as
        a message is."""
        if self.queued:
            await handing
            return None
        key = f"telegram:{update_id}"
        return self.adapter.spawn(handing, name=f"{key}:{what}", key=key)

    async def _membership(self, change: ChatMemberUpdated) -> None:
        """The bot's own membership of a chat changed: once it was removed from a group or blocked by the user of
        a private chat (``kicked``, ``left``), the chat's schedules are dropped (Telegram said it may not post)."""
        agent = self.adapter.agent
        if agent is None:
            return
        status = change.new_chat_member.status
        if status in ("kicked", "left"):
            cid = agent.context_id(telegram_chat, ChatArgs(chat_id=change.chat.id))
            await drop_conversation(agent, cid, f"Telegram says the bot's membership is now {status}")

    async def _press(self, query: CallbackQuery) -> None:
        """A press on one of the bot's inline buttons, routed by its data: Approve or Deny (``appr:``) to the
        approvals, a choice of a command's answer (``cfg:``) to the commands; any other press is left."""
        data = query.data or ""
        if data.startswith(APPROVAL_PREFIX):
            await self.approvals.on_press(query)
        elif data.startswith(CHOICE_PREFIX):
            await self.commands.on_choice(query)
