"""The python-telegram-bot side of guest mode (``guest.py`` says what it is): a ``guest_message`` update handed to
its own conversation, and its answer sent with ``answerGuestQuery``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from telegram import Bot, InlineQueryResultArticle, InputTextMessageContent, Message
from telegram.constants import ParseMode
from telegram.error import TelegramError

from core.entries import InputRef
from core.trust import TIER_PARAM, Tier

from ..chat.counters import Ignored
from ..chat.policy import Allowlist
from .guest import GUEST_MESSAGE, GuestArgs, telegram_guest
from .render import render_html, split_markdown
from .reply import translate_error

if TYPE_CHECKING:
    from core.definitions import Send

    from ..chat.adapter import ChatAdapter

__all__ = ("answer_guest", "guest_input", "on_guest_message")

log = logging.getLogger("extensions.telegram")


def guest_input(message: Message, *, bot_username: str) -> tuple[GuestArgs, InputRef] | None:
    """The conversation and the input of a guest request: the request's own text (the bot's ``@name`` taken out)
    and its summoner, nothing else of the message (what it replies to, a quote, the chat's title are not read).
    ``None`` without a query id or a summoner."""
    caller = message.guest_bot_caller_user or message.from_user
    if not message.guest_query_id or caller is None:
        return None
    text = (message.text or message.caption or "").replace(f"@{bot_username}", "").strip()
    params = {"user": caller.first_name, "user_id": str(caller.id), TIER_PARAM: Tier.SUMMONED.value}
    if caller.username:
        params["username"] = caller.username
    args = GuestArgs(query_id=message.guest_query_id, chat_id=message.chat.id)
    return args, InputRef(type=GUEST_MESSAGE, data=text, params=params)


async def on_guest_message(
    adapter: ChatAdapter,
    message: Message,
    *,
    enabled: bool,
    bot_username: str,
    send: Send | None,
    update_id: int,
    allowlist: Allowlist,
) -> None:
    """Answer a guest request in its own conversation (erased once answered: ``guest.py``). Left
    (logged) when ``TELEGRAM_GUEST_MODE`` is off. In front of a queue it goes to the queue as any message does, and
    the worker that answers it erases it (``guest.py``; what the queue keeps, no text, expires)."""
    found = guest_input(message, bot_username=bot_username)
    agent = adapter.agent
    if found is None or agent is None or send is None:
        return
    args, ref = found
    if not enabled:
        log.info("a guest request in chat %s left: TELEGRAM_GUEST_MODE is off", message.chat.id)
        adapter.metrics.ignored(telegram_guest, args, Ignored.POLICY)
        return
    if allowlist.users and ref.params["user_id"] not in allowlist.users:  # (TELEGRAM_ALLOWED_USERS; the chat is
        adapter.metrics.ignored(telegram_guest, args, Ignored.ALLOWLIST)  # not the bot's: its allowlist is not read)
        return
    adapter.metrics.received(telegram_guest, args)
    caller = ref.params["user_id"]
    log.info("chat %s: a guest request from user %s (%d characters)", message.chat.id, caller, len(str(ref.data)))
    await send(telegram_guest, args, ref, dedupe_key=f"telegram:{update_id}")  # (erased by its run's end)


async def answer_guest(bot: Bot, *, query_id: str, text: str) -> None:
    """Answer a guest request with ``text`` (Markdown, the first message's worth): Telegram posts it."""
    first = split_markdown(text)[0] if text else text
    result = InlineQueryResultArticle(
        id=query_id[:64],
        title="Answer",
        input_message_content=InputTextMessageContent(render_html(first), parse_mode=ParseMode.HTML),
    )
    try:
        await bot.answer_guest_query(guest_query_id=query_id, result=result)
    except TelegramError as exc:
        raise translate_error(exc, chat_id=0) from exc
