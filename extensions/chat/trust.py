"""Who a message's author is, in tiers (``core.trust.Tier``), and which other bots are answered, how often: decided
in code from the platform's facts, the same way on every platform.

A listener reads what its platform says about the author (a Telegram chat's administrators, a Discord member's
permissions and roles) and asks ``TrustRules.tier``; the tier goes into the input's ``tier`` param, so a worker of
a fleet reads it as the gateway computed it. What needs a request to the platform (Telegram's administrators of a
chat) is kept ``TRUST_CACHE_SECONDS`` in a ``TtlCache``. Another bot's message is answered only when the operator
lets that bot in (``TRUST_BOTS``), and at most ``TRUST_BOT_REPLIES`` times per ``TRUST_BOT_WINDOW`` seconds in one
chat (``SlidingCap``): two bots allowed to answer each other stop there.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Collection, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from core.trust import Tier

__all__ = ("SlidingCap", "TrustRules", "TtlCache")

V = TypeVar("V")


@dataclass(frozen=True, kw_only=True)
class TrustRules:
    """The operator's rules for tiers and bots (``BOT_ADMIN_USERS``, ``TRUST_*``)."""

    owners: frozenset[str] = frozenset()
    """Platform-qualified user ids of the owners (``telegram:123``): ``BOT_ADMIN_USERS``."""
    chat_admins: bool = True
    """A chat's administrators (Telegram) and members with ``admin_permissions`` (Discord) are admins."""
    admin_permissions: frozenset[str] = frozenset({"manage_guild"})
    """Discord permissions (discord.py names: ``manage_guild``, ``manage_channels``) that make a member an admin."""
    admin_roles: frozenset[str] = frozenset()
    """Discord role names or ids that make a member an admin."""
    member_users: frozenset[str] = frozenset()
    """Platform-qualified ids of the members; with ``member_roles``, when either is set, anyone else is a guest."""
    member_roles: frozenset[str] = frozenset()
    """Discord role names or ids of the members."""
    guest_days: float = 0.0
    """People who joined the server less than this many days ago are guests (Discord; 0: nobody is)."""
    bots: frozenset[str] = frozenset()
    """Other bots answered: ``telegram:123``, ``telegram:@name`` (lowercase), ``discord:123``, ``discord:@name``,
    or ``*`` (every bot)."""
    bot_replies: int = 5
    """Answers to bots per chat and window at most."""
    bot_window: float = 600.0
    """The window of ``bot_replies``, in seconds."""
    cache_seconds: float = 60.0
    """How long what the platform said about a chat's administrators is kept."""

    def tier(
        self,
        platform: str,
        user_id: int | str | None,
        *,
        is_bot: bool = False,
        admin: bool = False,
        roles: Collection[str] = (),
        joined_days: float | None = None,
    ) -> Tier:
        """The tier of ``user_id`` on ``platform``: a bot's is ``bot``; an owner's ``owner``; ``admin`` when the
        platform says so (``admin``: an administrator of the chat, or holding a permission the operator names) or
        the person has one of ``admin_roles``; a guest when members are listed and the person is not one of them,
        or joined less than ``guest_days`` ago; else ``member``. ``roles``: the person's Discord role ids and names;
        ``joined_days``: how long ago they joined the server, when the platform says."""
        if is_bot:
            return Tier.BOT
        who = f"{platform}:{user_id}"
        if who in self.owners:
            return Tier.OWNER
        if (admin and self.chat_admins) or (self.admin_roles and not self.admin_roles.isdisjoint(roles)):
            return Tier.ADMIN
        if self.member_users or self.member_roles:
            listed = who in self.member_users or not self.member_roles.isdisjoint(roles)
            if not listed:
                return Tier.GUEST
        if self.guest_days and joined_days is not None and joined_days < self.guest_days:
            return Tier.GUEST
        return Tier.MEMBER

    def allows_bot(self, platform: str, bot_id: int | str, username: str = "") -> bool:
        """True when the operator lets the bot ``bot_id`` (``@username``) be answered."""
        if not self.bots:
            return False
        names = {"*", f"{platform}:*", f"{platform}:{bot_id}"}
        if username:
            names.add(f"{platform}:@{username.lower()}")
        return not self.bots.isdisjoint(names)


@dataclass
class TtlCache(Generic[V]):
    """Values kept ``seconds`` (what a platform said about a chat), at most ``size`` of them."""

    seconds: float
    size: int = 10_000
    clock: Callable[[], float] = time.monotonic
    _values: OrderedDict[Hashable, tuple[float, V]] = field(default_factory=OrderedDict)

    async def get(self, key: Hashable, load: Callable[[], Awaitable[V]]) -> V:
        """The value of ``key``, from ``load()`` when missing or older than ``seconds`` (an error is not kept)."""
        now = self.clock()
        kept = self._values.get(key)
        if kept is not None and now - kept[0] < self.seconds:
            return kept[1]
        value = await load()
        self._values[key] = (self.clock(), value)
        self._values.move_to_end(key)
        while len(self._values) > self.size:
            self._values.popitem(last=False)
        return value

    def forget(self, key: Hashable) -> None:
        """Drop what is kept of ``key``."""
        self._values.pop(key, None)


@dataclass
class SlidingCap:
    """At most ``most`` of something per key in a sliding window of ``window`` seconds: ``take(key)`` counts one
    and is False once ``most`` were counted within the window (answers to other bots per chat; new web visitors
    per address). The ``size`` keys used last are kept."""

    most: int
    window: float
    size: int = 10_000
    clock: Callable[[], float] = time.monotonic
    _taken: OrderedDict[Hashable, deque[float]] = field(default_factory=OrderedDict)

    def take(self, key: Hashable) -> bool:
        """Count one for ``key`` if the cap allows it; False when it does not."""
        now = self.clock()
        times = self._taken.get(key)
        if times is None:
            times = self._taken[key] = deque()
        while times and now - times[0] >= self.window:
            times.popleft()
        self._taken.move_to_end(key)
        while len(self._taken) > self.size:
            self._taken.popitem(last=False)
        if len(times) >= self.most:
            return False
        times.append(now)
        return True
