"""Telegram Business: a business account (a person with Telegram Premium) connects the bot in its settings
(Telegram Business, Chatbots), and the bot then answers the account's private chats on its behalf.

Telegram tells the bot of the connection with a ``business_connection`` update (its id, the account, the private
chat the bot has with the account's owner, whether it is enabled and what the bot may do), and hands it each
message written in the account's chats as a ``business_message`` carrying the connection's id. Such a message goes
to the conversation of that chat reached through that connection (``ChatArgs.business_connection_id``: apart from
the same person's own chat with the bot), owned by the person writing, as any message does; everything the bot
writes there goes through the connection (``business_connection_id``), on the account's behalf. What the owner
writes in those chats, and what the bot wrote there itself, is not answered.

``BusinessConnections`` keeps the connections the bot learned (a connection a message names before its update
reached this process, after a restart or on another gateway, is asked of Telegram once: ``getBusinessConnection``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from telegram import BusinessConnection
from telegram.error import TelegramError

from ..chat.counters import Ignored

if TYPE_CHECKING:
    from collections.abc import Callable

    from telegram import Bot, Message

__all__ = ("BusinessConnections", "Connection")

log = logging.getLogger("extensions.telegram")


@dataclass(frozen=True, kw_only=True, slots=True)
class Connection:
    """One business account's connection to the bot, as Telegram last described it."""

    id: str
    """The connection's id (``business_connection_id`` in everything the bot writes through it)."""
    owner_id: int
    """The business account's user id: what it writes in its chats is its own, never answered."""
    owner_chat_id: int
    """The private chat between the account's owner and the bot."""
    enabled: bool
    """The connection is active (the owner may turn it off, or remove the bot)."""
    can_reply: bool
    """The bot may write in the account's chats (its rights in the Telegram Business settings)."""

    @classmethod
    def of(cls, connection: BusinessConnection) -> Connection:
        """The connection python-telegram-bot read."""
        rights = connection.rights
        return cls(
            id=connection.id,
            owner_id=connection.user.id,
            owner_chat_id=connection.user_chat_id,
            enabled=connection.is_enabled,
            can_reply=rights is not None and bool(rights.can_reply),
        )


class BusinessConnections:
    """The business connections of one bot, learned from its updates (``bot()`` gives the bot, to ask Telegram for a
    connection a message names before its update came)."""

    def __init__(self, *, bot: Callable[[], Bot]) -> None:
        self.bot = bot
        self.known: dict[str, Connection] = {}
        """The connections, by id."""

    def learn(self, update: BusinessConnection) -> Connection:
        """Keep what a ``business_connection`` update says of a connection (made, changed, turned off)."""
        connection = self.known[update.id] = Connection.of(update)
        state = "connected" if connection.enabled else "disconnected"
        log.info(
            "Telegram Business: account %s %s the bot (connection %s, %s)",
            connection.owner_id,
            state,
            connection.id,
            "may reply" if connection.can_reply else "may not reply",
        )
        return connection

    async def get(self, connection_id: str) -> Connection | None:
        """The connection ``connection_id``: known, or asked of Telegram (None when Telegram cannot say: logged)."""
        known = self.known.get(connection_id)
        if known is not None:
            return known
        try:
            found = await self.bot().get_business_connection(business_connection_id=connection_id)
        except TelegramError as exc:
            log.warning("Telegram Business connection %s could not be read: %s", connection_id, exc)
            return None
        return self.learn(found)

    async def ignored(self, message: Message) -> Ignored | None:
        """Why a message of a business account's chat gets no answer (None: it is answered as any message): the
        bot's own (written through the connection) or the account owner's, or a connection turned off, unknown or
        without the right to reply."""
        if message.sender_business_bot is not None:
            return Ignored.OWN
        connection = await self.get(message.business_connection_id or "")
        if connection is None or not connection.enabled or not connection.can_reply:
            return Ignored.POLICY
        if message.from_user is not None and message.from_user.id == connection.owner_id:
            return Ignored.OWN
        return None
