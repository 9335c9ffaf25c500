"""Telegram answers shown while they are written (``TELEGRAM_STREAM_REPLIES``).

The first text is posted as a reply to the message being answered, then edited at most once per
``TELEGRAM_STREAM_INTERVAL``; past 4,096 characters (measured after rendering, as Telegram counts) the
answer continues in a new message. The output handler finishes the reply with the exact final text. In
private chats, ``TELEGRAM_STREAM_DRAFTS`` shows the message being written as a draft (``sendMessageDraft``)
and posts it once complete. The platform-independent part is ``extensions.chat.stream``.
"""

from __future__ import annotations

import secrets

from telegram import Bot

from ..chat.exactly_once import ReplyRecord
from ..chat.stream import LiveReply
from .render import render_html, split_markdown, visible_text
from .reply import delete_message, edit_piece, post_piece, send_draft

__all__ = ("TelegramSink", "live_reply", "pieces")


def pieces(markdown: str) -> list[str]:
    """``markdown`` cut into messages as ``post_reply`` cuts it (pieces that render empty are left out)."""
    return [p for p in split_markdown(markdown) if visible_text(render_html(p)).strip()]


class TelegramSink:
    """Posts, edits and deletes the messages of one answer in one chat (and forum topic)."""

    def __init__(
        self, bot: Bot, *, chat_id: int, thread_id: int | None, reply_to: int | None, business: str | None = None
    ) -> None:
        self.bot = bot
        self.chat_id = chat_id
        """Where the messages go (updated when a group turns out to have become a supergroup)."""
        self.thread_id = thread_id
        self.reply_to = reply_to
        self.business = business
        """The business connection the chat is reached through (the messages go on behalf of its account)."""
        self.draft_id = secrets.randbits(31) | 1
        """Identifies this answer's draft (non-zero; drafts with the same id are animated)."""

    async def post(self, text: str, *, index: int) -> int:
        """Post a message (the first as a reply); returns its id."""
        message = await post_piece(
            self.bot,
            chat_id=self.chat_id,
            thread_id=self.thread_id,
            piece=text,
            reply_to=self.reply_to if index == 0 else None,
            business=self.business,
        )
        self.chat_id = message.chat_id
        return message.message_id

    async def edit(self, handle: int, text: str) -> None:
        """Edit a posted message."""
        await edit_piece(self.bot, chat_id=self.chat_id, message_id=handle, piece=text, business=self.business)

    async def delete(self, handle: int) -> None:
        """Delete a posted message."""
        await delete_message(self.bot, chat_id=self.chat_id, message_id=handle, business=self.business)

    async def preview(self, text: str) -> None:
        """Show ``text`` as the draft of the message being written (private chats)."""
        await send_draft(self.bot, chat_id=self.chat_id, thread_id=self.thread_id, draft_id=self.draft_id, piece=text)


def live_reply(
    bot: Bot,
    *,
    chat_id: int,
    thread_id: int | None,
    reply_to: int | None,
    interval: float,
    drafts: bool,
    record: ReplyRecord | None = None,
    business: str | None = None,
) -> LiveReply:
    """A live reply into one chat (through the business connection ``business``, when given); drafts only where
    Telegram offers them (the bot's own private chats). With a queued run's ``record`` it follows the run's ledger
    (``extensions.chat.exactly_once``)."""
    sink = TelegramSink(bot, chat_id=chat_id, thread_id=thread_id, reply_to=reply_to, business=business)
    return LiveReply(
        sink=sink,
        split=pieces,
        interval=interval,
        preview=sink.preview if drafts and chat_id > 0 and business is None else None,
        record=record,
    )
