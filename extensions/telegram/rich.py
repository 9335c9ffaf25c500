"""Rich messages (Bot API 10.1): an answer with structure (a heading, a table, a list, a code block) is sent with
``sendRichMessage``, whose ``rich_message`` (an ``InputRichMessage``) carries the Markdown and Telegram lays it out
(tables, headings, lists that plain HTML formatting cannot show). python-telegram-bot 22.8 does not cover 10.1, so
this goes through its raw request (``Bot.do_api_request``).

Where Telegram refuses it (a Bot API server older than 10.1, a chat or a message it cannot take as rich, a text over
the rich message's size), the answer is posted as today, rendered to Telegram HTML and split (``reply.post_reply``):
the fallback loses the table's layout, never the answer. ``TELEGRAM_RICH_MESSAGES=false`` always posts as today.

An answer shown while it is written (``TELEGRAM_STREAM_REPLIES``), or posted by a fleet's worker (which follows the
run's reply ledger), is finished as today's formatted text, then, when it has structure and is one message, that
message is edited into the rich layout (``editMessageText`` with ``rich_message``, Bot API 10.1: ``rich_edit``). A
refusal leaves the formatted text. Streaming stays plain while it is written: Telegram's rich drafts
(``sendRichMessageDraft``) animate in private chats only, and a rich message re-laid out at every edit would
jump.
"""

from __future__ import annotations

import logging

from telegram import Bot, Message
from telegram.error import BadRequest, TelegramError

from ..chat.structure import has_structure
from .reply import post_reply, translate_error

__all__ = ("RICH_LIMIT", "post_answer", "rich_edit", "wants_rich")

log = logging.getLogger("extensions.telegram")

_EDIT = "editmessagetext"

RICH_LIMIT = 4096
"""The longest Markdown sent as one rich message (longer answers are posted as today, split)."""


def wants_rich(text: str) -> bool:
    """``text`` is laid out as a rich message: it has structure and fits in one."""
    return len(text) <= RICH_LIMIT and has_structure(text)


async def rich_edit(bot: Bot, *, chat_id: int, message_id: int, text: str) -> bool:
    """Edit the message ``message_id`` (the whole answer, already posted as formatted text) into a rich message of
    ``text``; True when it shows the rich layout. A refusal is logged and leaves the message as it was."""
    params = {"chat_id": chat_id, "message_id": message_id, "rich_message": {"markdown": text}}
    try:
        # Bot.edit_message_text always sends a text, which rich_message replaces; the raw request under the method's
        # lower-case name (Bot API methods are case-insensitive), which python-telegram-bot does not take for its own
        await bot.do_api_request(_EDIT, api_kwargs=params, return_type=Message)
    except BadRequest as exc:
        if "not modified" in exc.message:  # (a batch delivered again: it is rich already)
            return True
        log.info("chat %s: the rich layout of message %s was refused (%s)", chat_id, message_id, exc.message)
        return False
    except TelegramError as exc:
        log.warning("chat %s: message %s was left as formatted text: %s", chat_id, message_id, exc)
        return False
    return True


async def post_answer(
    bot: Bot,
    *,
    chat_id: int,
    thread_id: int | None,
    text: str,
    reply_to: int | None,
    rich: bool,
    business: str | None = None,
) -> list[int]:
    """Post an answer: as a rich message when ``rich`` and it has structure, falling back to today's formatting
    where Telegram refuses it; else as today. In a chat reached through the business connection ``business``, as
    today (on the account's behalf: ``sendRichMessage`` takes no business connection). Returns the ids of the
    messages sent."""
    if rich and business is None and wants_rich(text):
        params: dict[str, object] = {"chat_id": chat_id, "rich_message": {"markdown": text}}
        if thread_id is not None:
            params["message_thread_id"] = thread_id
        if reply_to is not None:
            params["reply_parameters"] = {"message_id": reply_to, "allow_sending_without_reply": True}
        try:
            message = await bot.do_api_request("sendRichMessage", api_kwargs=params, return_type=Message)
        except BadRequest as exc:  # an older Bot API server, a chat or a text it cannot take as rich
            log.info("chat %s: the rich message was refused (%s); posting it as formatted text", chat_id, exc.message)
        except TelegramError as exc:
            raise translate_error(exc, chat_id=chat_id) from exc
        else:
            return [message.message_id]
    return await post_reply(bot, chat_id=chat_id, thread_id=thread_id, text=text, reply_to=reply_to, business=business)
