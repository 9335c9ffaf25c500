"""Trust tiers: who wrote a message, as the platform says, ranked.

The tier of a message's author is computed in code by the adapter that received it (``extensions.chat.trust``:
``BOT_ADMIN_USERS``, the chat's administrators, an operator's roles and allowlists, other bots) and carried with
the input as its ``tier`` param, so a worker of a fleet reads it without asking the platform again. The model never
chooses it; the prompt shows it (``<input ... tier="member">``) only so the model can explain a refusal, and not
where it goes without saying (``InputRef.hidden``: the tier every web visitor has, the terminal's owner).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..entries import InputRef

__all__ = ("TIER_PARAM", "Tier", "tier_of")

TIER_PARAM = "tier"
"""The input param carrying its author's tier (``InputRef.params["tier"]``)."""


class Tier(enum.StrEnum):
    """Who wrote a message, from the most trusted down. ``a.at_least(b)``: ``a`` ranks ``b`` or above."""

    OWNER = "owner"
    """An operator of the bot (``BOT_ADMIN_USERS``), anywhere."""
    ADMIN = "admin"
    """An administrator of the chat: a Telegram chat administrator, a Discord member with a permission
    (``TRUST_ADMIN_PERMISSIONS``) or a role (``TRUST_ADMIN_ROLES``) the operator names."""
    MEMBER = "member"
    """Anyone else the bot answers."""
    GUEST = "guest"
    """A person outside the operator's members (``TRUST_MEMBER_USERS`` / ``TRUST_MEMBER_ROLES``, when set)."""
    SUMMONED = "summoned"
    """A person who summoned the bot as a guest into a chat it is not part of (Telegram's guest mode,
    ``TELEGRAM_GUEST_MODE``): the least trusted person; the chat it was summoned into is not the bot's."""
    BOT = "bot"
    """Another bot the operator lets the bot answer (``TRUST_BOTS``, ``DISCORD_ALLOW_BOTS``)."""

    @property
    def rank(self) -> int:
        """5 for the owner down to 0 for a bot."""
        return _RANKS[self._value_]

    def at_least(self, minimum: Tier) -> bool:
        """True when this tier may do what ``minimum`` may."""
        return _RANKS[self._value_] >= _RANKS[minimum._value_]

    @classmethod
    def lowest(cls, tiers: Iterable[Tier]) -> Tier | None:
        """The least trusted of ``tiers`` (None when there are none)."""
        return min(tiers, key=lambda tier: _RANKS[tier._value_], default=None)

    @classmethod
    def parse(cls, value: str) -> Tier:
        """The tier named ``value`` (case-insensitive); ``ValueError`` naming the choices otherwise."""
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise ValueError(f"{value!r} is not a tier; use one of {', '.join(t.value for t in cls)}") from None


_RANKS = {"owner": 5, "admin": 4, "member": 3, "guest": 2, "summoned": 1, "bot": 0}
"""By the tiers' values: a plain ``str`` key hashes in C (an enum member's hash is a Python call)."""


def tier_of(ref: InputRef, *, default: Tier = Tier.MEMBER, owners: frozenset[str] = frozenset()) -> Tier:
    """The tier of ``ref``'s author: its ``tier`` param as the adapter set it; for an input that carries none (the
    terminal, a schedule, another extension's input), ``owner`` when its user is in ``owners``
    (``BOT_ADMIN_USERS``), else ``default``. An unknown value counts as a guest."""
    value = ref.params.get(TIER_PARAM)
    if value:
        try:
            return Tier(value)
        except ValueError:
            return Tier.GUEST
    if owners:
        user = ref.params.get("user_id") or ref.params.get("author_id")
        if user and f"{ref.params.get('platform') or ref.type.partition(':')[0]}:{user}" in owners:
            return Tier.OWNER
    return default
