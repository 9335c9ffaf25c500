"""Who is who in a Telegram chat: the tier (``core.trust``, ``TRUST_*``) of whoever writes a message or presses a
button, and the administrators of a group it rests on.

A message's author and an approval's presser get their tier the same way, in the chat they wrote or pressed in:
the owners (``BOT_ADMIN_USERS``) are known without asking Telegram; in a group, its administrators (asked with
getChatAdministrators, kept ``TRUST_CACHE_SECONDS``) are admins, and so is an administrator writing as the group;
in a private chat nobody else is an admin.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from telegram.error import TelegramError

if TYPE_CHECKING:
    from telegram import Bot

    from core.trust import Tier

    from ..chat.adapter import ChatAdapter

__all__ = ("ChatMembers",)

log = logging.getLogger("extensions.telegram")


class ChatMembers:
    """The tiers of the people in one bot's chats, by the adapter's trust rules (``ChatAdapter.trust``)."""

    def __init__(self, adapter: ChatAdapter, *, bot: Callable[[], Bot], timeout: float) -> None:
        self.adapter = adapter
        """The trust rules and what Telegram said lately about each group's administrators (``chat_admins``)."""
        self.bot = bot
        self.timeout = timeout
        """Seconds getChatAdministrators may take (``TELEGRAM_REQUEST_TIMEOUT``)."""

    async def tier_in(
        self, *, chat_id: int, user_id: int | None, private: bool, is_bot: bool, anonymous_admin: bool = False
    ) -> Tier:
        """The tier of ``user_id`` writing or pressing in ``chat_id``: an administrator of the group is an admin
        (asked only when it can matter), and so is one writing as the group itself (``anonymous_admin``)."""
        rules = self.adapter.trust
        admin = anonymous_admin
        asked = not (admin or private or is_bot or user_id is None or f"telegram:{user_id}" in rules.owners)
        if asked and rules.chat_admins:
            admins = await self.admins(chat_id)
            admin = admins is not None and str(user_id) in admins
        return rules.tier("telegram", user_id, is_bot=is_bot, admin=admin)

    async def admins(self, chat_id: int) -> frozenset[str] | None:
        """The user ids of the administrators of the group ``chat_id`` (getChatAdministrators), kept
        ``TRUST_CACHE_SECONDS``; None when Telegram could not say (not kept: asked again next time)."""

        async def load() -> frozenset[str]:
            async with asyncio.timeout(self.timeout):
                members = await self.bot().get_chat_administrators(chat_id=chat_id)
            return frozenset(str(m.user.id) for m in members)

        try:
            return await self.adapter.chat_admins.get(chat_id, load)
        except (TelegramError, TimeoutError) as exc:
            log.warning("chat %s: could not ask for its administrators (%s); they count as members", chat_id, exc)
            return None
