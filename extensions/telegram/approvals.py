"""Approvals in Telegram (``core.approvals``): the request posted with an inline keyboard (Approve / Deny), a
press answered (an alert for whoever may not decide) and the decision shown in place of the keyboard.

The request goes to the conversation (its forum topic), or to ``ACTIONS_APPROVAL_CHATS``' Telegram chat. The
presser's tier is computed like a message author's (``members``), in the chat of the pressed message: its
administrators (getChatAdministrators, kept ``TRUST_CACHE_SECONDS``) and the owners may decide; in a private chat
only the owners.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from telegram import Bot, CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from core.approvals import Approval, Pressed
from core.errors import PlatformError

from ..chat.approvals import (
    ChatApprovals,
    button_data,
    button_labels,
    parse_button,
    press_answer,
    request_text,
    settled_text,
)

if TYPE_CHECKING:
    from ..chat.trust import TrustRules
    from .members import ChatMembers

__all__ = ("TelegramApprovals",)

log = logging.getLogger("extensions.telegram")


class TelegramApprovals(ChatApprovals):
    """The Telegram side of the agent's approvals (``core.approvals.Asker``) and its presses."""

    platform = "telegram"

    def __init__(
        self,
        *,
        bot: Callable[[], Bot],
        rules: Callable[[], TrustRules],
        members: ChatMembers,
        timeout: float,
        language: Callable[[Approval], Awaitable[str | None]] | None = None,
    ) -> None:
        super().__init__(rules=rules, timeout=timeout, language=language)
        self.bot = bot
        self.members = members
        """The presser's tier, in the chat they pressed in."""

    # -- core.approvals.Asker -------------------------------------------------------------------------

    async def ask(self, approval: Approval, *, target: str | None) -> str | None:
        chat_id, thread_id = _where(approval, target)
        language = await self.language_of(approval)
        approve, deny = button_labels(language)
        keyboard = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(f"✅ {approve}", callback_data=button_data(approval.id, approve=True)),
                    InlineKeyboardButton(f"❌ {deny}", callback_data=button_data(approval.id, approve=False)),
                ]
            ]
        )
        text = request_text(approval, language)
        try:
            async with asyncio.timeout(self.timeout):
                sent = await self.bot().send_message(
                    chat_id=chat_id, message_thread_id=thread_id, text=text, reply_markup=keyboard
                )
        except TelegramError as exc:
            raise PlatformError(f"Telegram refused the approval request: {exc.message}") from exc
        return f"{chat_id}:{sent.message_id}"

    async def settle(self, approval: Approval) -> None:
        if approval.prompt is None:
            return
        chat, _, message = approval.prompt.rpartition(":")
        text = settled_text(approval, await self.language_of(approval))
        try:
            async with asyncio.timeout(self.timeout):
                await self.bot().edit_message_text(chat_id=int(chat), message_id=int(message), text=text)
        except (TelegramError, ValueError) as exc:
            log.warning("could not show the decision on approval %s: %s", approval.id, exc)

    # -- a press ----------------------------------------------------------------------------------------

    async def on_press(self, query: CallbackQuery) -> None:
        """Handle a press on an approval button (one whose data does not read as an approval's is left)."""
        parsed = parse_button(query.data or "")
        desk = self.desk()
        message = query.message
        if parsed is None or desk is None or message is None:
            return
        approval_id, approve = parsed
        chat = message.chat
        user = query.from_user
        tier = await self.members.tier_in(
            chat_id=chat.id, user_id=user.id, private=chat.type == "private", is_bot=user.is_bot
        )
        target = desk.admin_chats.get(self.platform)
        pressed, approval = await desk.press(
            approval_id,
            approve=approve,
            by=f"telegram:{user.id}",
            name=user.full_name,
            tier=tier,
            asked_here=lambda found: _posted_at(found, target, chat.id, message.message_id),
        )
        language = await self.language_of(approval)
        answer = press_answer(pressed, approval, language)
        try:
            async with asyncio.timeout(self.timeout):
                await query.answer(text=answer[:200], show_alert=pressed is not Pressed.DECIDED)
                if approval is not None and pressed in (Pressed.DECIDED, Pressed.ALREADY) and approval.decision:
                    await self.bot().edit_message_text(
                        chat_id=chat.id,
                        message_id=message.message_id,
                        text=settled_text(approval, language),
                    )
        except (TelegramError, TimeoutError) as exc:
            log.warning("could not answer a press on approval %s: %s", approval_id, exc)


def _posted_at(approval: Approval, target: str | None, chat_id: int, message_id: int) -> bool:
    """True when ``approval``'s request was posted as the message ``message_id`` of ``chat_id`` (or, while where it
    was posted is not noted yet, goes to that chat): the tier of a presser is computed in the chat they pressed in."""
    if approval.platform != "telegram":
        return False
    if approval.prompt is not None:
        return approval.prompt == f"{chat_id}:{message_id}"
    try:
        return _where(approval, target)[0] == chat_id
    except (KeyError, TypeError, ValueError):
        return False


def _where(approval: Approval, target: str | None) -> tuple[int, int | None]:
    """The chat (and forum topic) the request of ``approval`` goes to."""
    if target:
        chat, _, thread = target.partition(":")
        return int(chat), int(thread) if thread else None
    args = approval.args if isinstance(approval.args, dict) else {}
    return int(args["chat_id"]), args.get("thread_id")
