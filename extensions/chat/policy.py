"""Who gets an answer: decided in code from the platform's facts, never by the model."""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ("Allowlist", "ReplyPolicy", "should_reply")


class ReplyPolicy(enum.StrEnum):
    """When the bot answers in a group or server channel (private chats are always answered)."""

    ALWAYS = "always"
    """Every message."""
    MENTION = "mention"
    """Only when the bot is mentioned, replied to, or given a command."""
    OFF = "off"
    """Never (the bot stays silent in groups)."""


@dataclass(frozen=True, kw_only=True)
class Allowlist:
    """Optional allowlists; an empty list allows everyone."""

    chats: frozenset[str] = frozenset()
    """Chat, channel (or guild) ids allowed."""
    users: frozenset[str] = frozenset()
    """User ids allowed."""

    @classmethod
    def of(cls, *, chats: Collection[int | str] = (), users: Collection[int | str] = ()) -> Allowlist:
        """Build from ids of any type."""
        return cls(chats=frozenset(str(c) for c in chats), users=frozenset(str(u) for u in users))

    def allows(self, *, chat_ids: Collection[int | str], user_id: int | str | None) -> bool:
        """True when one of ``chat_ids`` (a chat and its parent, a channel and its guild) and the user pass."""
        if self.chats and not any(str(c) in self.chats for c in chat_ids):
            return False
        return not (self.users and (user_id is None or str(user_id) not in self.users))


def should_reply(
    policy: ReplyPolicy,
    *,
    private: bool,
    mentioned: bool = False,
    replied_to_bot: bool = False,
    command: bool = False,
) -> bool:
    """The reply rule both adapters share."""
    if private:
        return True
    if policy is ReplyPolicy.ALWAYS:
        return True
    if policy is ReplyPolicy.OFF:
        return False
    return mentioned or replied_to_bot or command
