"""Posting a reply to Telegram: rendered, split, threaded under the message it answers.

Every message the bot writes goes through ``post_reply`` (answers, command replies, error notices), or,
for an answer shown while it is written, through ``post_piece``/``edit_piece``/``delete_message`` (one
message each, see ``live.py``). Telegram's errors become ``PlatformError``
here; a 429 is waited out by the rate limiter before it ever reaches this module.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging

from telegram import Bot, InputFile, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, NetworkError, RetryAfter, TelegramError

from core.errors import ChatGoneError, PlatformError

from .render import MESSAGE_LIMIT, render_html, split_markdown, split_plain, utf16_len, visible_text

__all__ = (
    "CAPTION_LIMIT",
    "DRAFT_STOP",
    "delete_message",
    "edit_piece",
    "post_file",
    "post_piece",
    "post_reply",
    "send_draft",
    "translate_error",
)

log = logging.getLogger("extensions.telegram")

DRAFT_STOP = {"can_stop": True, "keep_on_stop": True}
"""Bot API 10.3 (python-telegram-bot 22.8 has no argument for them, so they go as ``api_kwargs``): a draft shows a
Stop button, and a press keeps what it showed until the bot posts the answer; Telegram then sends the update
``stopped_message_generation`` (``Listener``), and the bot stops its own model call."""
content_log = logging.getLogger("content.telegram")

_INLINE_SPLIT = 4096
"""Texts up to this long are split on the event loop (one render); longer ones in a thread."""


def translate_error(exc: TelegramError, *, chat_id: int) -> PlatformError:
    """Our error for one of python-telegram-bot's, saying what happened and what to do."""
    if isinstance(exc, Forbidden):  # "bot was blocked by the user", "bot was kicked from the group chat"
        return ChatGoneError(
            f"Telegram refused to post in chat {chat_id}: {exc.message} (the bot was blocked, removed "
            "from the chat or may not write there)"
        )
    elif isinstance(exc, RetryAfter):
        wait = exc.retry_after
        seconds = wait.total_seconds() if isinstance(wait, dt.timedelta) else wait
        message = (
            f"Telegram kept answering 429 Too Many Requests for chat {chat_id} (retry after {seconds:g} s); "
            "raise TELEGRAM_MAX_RETRIES or lower TELEGRAM_RATE_LIMIT"
        )
    elif isinstance(exc, BadRequest):
        message = f"Telegram refused the message for chat {chat_id}: {exc.message}"
    elif isinstance(exc, NetworkError):
        message = (
            f"could not reach the Telegram Bot API ({exc.message}); check the network, TELEGRAM_API_URL "
            "and TELEGRAM_REQUEST_TIMEOUT"
        )
    else:
        message = f"Telegram failed a request for chat {chat_id}: {exc.message}"
    return PlatformError(message)


def _is_parse_error(exc: BadRequest) -> bool:
    return "can't parse entities" in exc.message.lower() or "can't find end" in exc.message.lower()


async def _send(
    bot: Bot,
    *,
    chat_id: int,
    thread_id: int | None,
    text: str,
    html: bool,
    reply_to: int | None,
    business: str | None = None,
) -> Message:
    reply = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None
    return await bot.send_message(
        chat_id=chat_id,
        text=text,
        parse_mode=ParseMode.HTML if html else None,
        message_thread_id=thread_id,
        reply_parameters=reply,
        business_connection_id=business,
    )


async def post_reply(
    bot: Bot,
    *,
    chat_id: int,
    thread_id: int | None,
    text: str,
    reply_to: int | None,
    markdown: bool = True,
    business: str | None = None,
) -> list[int]:
    """Post ``text`` to the chat (and forum topic), the first message as a reply to ``reply_to``; ``business``: the
    business connection the chat is reached through (the messages go on behalf of its account).

    Markdown is rendered to Telegram HTML and split at 4,096 characters measured after rendering; a piece
    Telegram cannot parse is sent again as plain text. Returns the ids of the messages sent, in order.
    """
    content_log.info("chat %s reply: %s", chat_id, text)
    split = split_markdown if markdown else split_plain
    # a long answer is measured many times while it is cut: do that off the event loop
    pieces = await asyncio.to_thread(split, text) if len(text) > _INLINE_SPLIT else split(text)
    sent: list[int] = []
    try:
        for piece in pieces:
            rendered = render_html(piece) if markdown else piece
            if markdown and not visible_text(rendered).strip():
                continue
            first = reply_to if not sent else None
            try:
                message = await _send(
                    bot,
                    chat_id=chat_id,
                    thread_id=thread_id,
                    text=rendered,
                    html=markdown,
                    reply_to=first,
                    business=business,
                )
            except ChatMigrated as exc:  # the group became a supergroup: write there from now on
                chat_id = exc.new_chat_id
                message = await _send(
                    bot, chat_id=chat_id, thread_id=thread_id, text=rendered, html=markdown, reply_to=None
                )
            except BadRequest as exc:
                if not (markdown and _is_parse_error(exc)):
                    raise
                log.warning("Telegram could not parse a rendered reply (%s); sending it as plain text", exc.message)
                for plain in split_plain(piece):
                    first = reply_to if not sent else None
                    message = await _send(
                        bot,
                        chat_id=chat_id,
                        thread_id=thread_id,
                        text=plain,
                        html=False,
                        reply_to=first,
                        business=business,
                    )
                    sent.append(message.message_id)
                continue
            sent.append(message.message_id)
    except TelegramError as exc:
        raise translate_error(exc, chat_id=chat_id) from exc
    return sent


CAPTION_LIMIT = 1024
"""Characters Telegram shows in a photo's or voice message's caption."""


async def post_file(
    bot: Bot,
    *,
    chat_id: int,
    thread_id: int | None,
    voice: bool,
    data: bytes,
    name: str,
    caption: str,
    reply_to: int | None,
    business: str | None = None,
) -> int:
    """Post a photo (``sendPhoto``) or, with ``voice``, a voice message (``sendVoice``, OGG/Opus) to the chat, as a
    reply to ``reply_to`` (through the business connection ``business``, when given); the caption is plain text (at
    most 1,024 characters). Returns the message's id."""
    reply = ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to else None
    upload = InputFile(data, filename=name)
    text = caption[:CAPTION_LIMIT] or None
    try:
        if voice:
            message = await bot.send_voice(
                chat_id=chat_id,
                voice=upload,
                caption=text,
                message_thread_id=thread_id,
                reply_parameters=reply,
                business_connection_id=business,
            )
        else:
            message = await bot.send_photo(
                chat_id=chat_id,
                photo=upload,
                caption=text,
                message_thread_id=thread_id,
                reply_parameters=reply,
                business_connection_id=business,
            )
    except TelegramError as exc:
        raise translate_error(exc, chat_id=chat_id) from exc
    return message.message_id


def _not_modified(exc: BadRequest) -> bool:
    return "message is not modified" in exc.message.lower()


def _plain(piece: str, rendered: str) -> str:
    """What to send when Telegram refused the HTML of one message: the Markdown as written, as
    ``post_reply`` does, unless only the rendered text fits in one message."""
    return piece if utf16_len(piece) <= MESSAGE_LIMIT else visible_text(rendered)


async def post_piece(
    bot: Bot, *, chat_id: int, thread_id: int | None, piece: str, reply_to: int | None, business: str | None = None
) -> Message:
    """Post one piece of Markdown (already cut to fit) as one message (through the business connection
    ``business``, when given); if Telegram cannot parse the rendered HTML, the same text goes as plain text. A group
    that became a supergroup is followed (the returned message says in which chat it went)."""
    rendered = render_html(piece)
    send = functools.partial(_send, bot, thread_id=thread_id, business=business)
    try:
        try:
            return await send(chat_id=chat_id, text=rendered, html=True, reply_to=reply_to)
        except ChatMigrated as exc:
            chat_id = exc.new_chat_id
            return await send(chat_id=chat_id, text=rendered, html=True, reply_to=None)
        except BadRequest as exc:
            if not _is_parse_error(exc):
                raise
            log.warning("Telegram could not parse a rendered reply (%s); sending it as plain text", exc.message)
            plain = _plain(piece, rendered)
            return await send(chat_id=chat_id, text=plain, html=False, reply_to=reply_to)
    except TelegramError as exc:
        raise translate_error(exc, chat_id=chat_id) from exc


async def edit_piece(bot: Bot, *, chat_id: int, message_id: int, piece: str, business: str | None = None) -> None:
    """Make message ``message_id`` show one piece of Markdown (``business``: the business connection it was posted
    through); plain text if Telegram cannot parse the rendered HTML. An edit that changes nothing ("message is not
    modified") is not an error."""
    rendered = render_html(piece)
    try:
        try:
            await bot.edit_message_text(
                text=rendered,
                chat_id=chat_id,
                message_id=message_id,
                parse_mode=ParseMode.HTML,
                business_connection_id=business,
            )
        except BadRequest as exc:
            if _not_modified(exc):
                return
            if not _is_parse_error(exc):
                raise
            log.warning("Telegram could not parse a rendered edit (%s); editing to plain text", exc.message)
            try:
                await bot.edit_message_text(
                    text=_plain(piece, rendered),
                    chat_id=chat_id,
                    message_id=message_id,
                    business_connection_id=business,
                )
            except BadRequest as plain_exc:
                if not _not_modified(plain_exc):
                    raise
    except TelegramError as exc:
        raise translate_error(exc, chat_id=chat_id) from exc


async def delete_message(bot: Bot, *, chat_id: int, message_id: int, business: str | None = None) -> None:
    """Delete one of the bot's messages (one posted through the business connection ``business``: with
    ``deleteBusinessMessages``, Telegram's way for those)."""
    try:
        if business is not None:
            await bot.delete_business_messages(business_connection_id=business, message_ids=[message_id])
        else:
            await bot.delete_message(chat_id=chat_id, message_id=message_id)
    except TelegramError as exc:
        raise translate_error(exc, chat_id=chat_id) from exc


async def send_draft(bot: Bot, *, chat_id: int, thread_id: int | None, draft_id: int, piece: str) -> None:
    """Show one piece of Markdown as the draft ``draft_id`` of a message being written (private chats), with
    Telegram's Stop button (``DRAFT_STOP``); plain text if Telegram cannot parse the rendered HTML."""
    rendered = render_html(piece)
    try:
        try:
            await bot.send_message_draft(
                chat_id=chat_id,
                draft_id=draft_id,
                text=rendered,
                parse_mode=ParseMode.HTML,
                message_thread_id=thread_id,
                api_kwargs=DRAFT_STOP,
            )
        except BadRequest as exc:
            if not _is_parse_error(exc):
                raise
            await bot.send_message_draft(
                chat_id=chat_id,
                draft_id=draft_id,
                text=_plain(piece, rendered),
                message_thread_id=thread_id,
                api_kwargs=DRAFT_STOP,
            )
    except TelegramError as exc:
        raise translate_error(exc, chat_id=chat_id) from exc
