"""The history store protocol: every input and output of every conversation, searchable, and the rolling
summary of what left the prompt's window.

The working memory (``working:<context id>`` in a ``MemoryStore``) holds the newest entries only; the
history store keeps them all, so ``search_history`` can find a message from months ago and the summarizer
can fold what the window no longer shows. Embedded: ``SQLiteHistory`` (FTS5). Distributed:
``PostgresHistory`` (``DATABASE_URL``, full-text search with a GIN index).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..slots import Slot
from ..unicode_text import repair_text

__all__ = (
    "FOREVER",
    "HISTORY",
    "ConversationIndex",
    "ConversationInfo",
    "HistoryEntry",
    "HistoryStore",
    "Summary",
    "excerpt",
    "message_prefix",
    "query_words",
    "time_range",
)


def message_prefix(message_id: str) -> str:
    """How the history ids of a platform message's entries start (``recording.history_id``)."""
    return f"m{message_id}/"


@dataclass(frozen=True, kw_only=True)
class HistoryEntry:
    """One message of a conversation: what a user said or what the bot answered."""

    id: str
    """Unique within the conversation: storing the same id again is a no-op (a redelivered batch)."""
    ts: int
    """When it was said, in ms since the epoch."""
    role: str
    """``user`` (an input) or ``assistant`` (the bot's output)."""
    who: str
    """Who said it: the user's display name, or ``assistant``."""
    text: str
    """What was said."""
    seq: int = 0
    """The store's order of arrival (0 until stored)."""

    def __post_init__(self) -> None:
        # a lone surrogate cannot be written to SQLite or PostgreSQL: repaired here, whoever made the entry
        object.__setattr__(self, "who", repair_text(self.who))
        object.__setattr__(self, "text", repair_text(self.text))


@dataclass(frozen=True, kw_only=True)
class Summary:
    """The rolling summary of a conversation."""

    text: str = ""
    """What the entries folded so far said, in a few sentences."""
    upto: int = 0
    """The ``seq`` of the newest entry folded into it (0: none yet)."""
    updated: int = 0
    """When it was written, in ms since the epoch."""


@runtime_checkable
class HistoryStore(Protocol):
    """Where every conversation's full history and rolling summary live. Implementations raise
    ``MemoryStoreError`` on failure and never block the event loop."""

    async def append(self, cid: str, entries: Sequence[HistoryEntry]) -> None:
        """Store ``entries`` of conversation ``cid`` (ids already stored are skipped)."""
        ...

    async def search(
        self, cid: str, *, words: str = "", since: int | None = None, until: int | None = None, limit: int = 5
    ) -> list[HistoryEntry]:
        """The newest entries of ``cid`` containing every word of ``words`` as a whole word, in any case (all
        entries when empty), said
        between ``since`` and ``until`` (ms, inclusive), newest first."""
        ...

    async def pending(self, cid: str, *, after: int, keep: int, limit: int) -> list[HistoryEntry]:
        """The oldest ``limit`` entries of ``cid`` after ``seq`` ``after``, but only if at least ``keep``
        newer entries follow them (those are still in the prompt's window); else an empty list."""
        ...

    async def summary(self, cid: str) -> Summary:
        """The summary of ``cid`` (an empty one when there is none)."""
        ...

    async def set_summary(self, cid: str, summary: Summary, *, expected: int) -> bool:
        """Replace the summary of ``cid`` if it still covers up to ``expected`` (another writer may have
        folded meanwhile); True if written."""
        ...

    async def count(self, cid: str) -> int:
        """How many entries ``cid`` has."""
        ...

    async def forget(self, cid: str) -> None:
        """Delete the history and summary of ``cid``."""
        ...

    async def delete(self, cid: str, ids: Sequence[str], *, messages: Sequence[str] = ()) -> int:
        """Delete the entries ``ids`` of ``cid``, and those of the platform messages ``messages`` (their ids start
        with ``message_prefix``): their authors deleted the messages. How many were there."""
        ...

    async def prune(self, *, before: int) -> int:
        """Delete entries of every conversation said before ``before`` (ms); returns how many."""
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...


@dataclass(frozen=True, kw_only=True)
class ConversationInfo:
    """One conversation as a list of conversations shows it (no message text)."""

    cid: str
    """The context id (``telegram:chat:123``)."""
    entries: int
    """Entries it has (with a search: entries matching it)."""
    last_ts: int
    """When its newest entry (or newest match) was said, in ms since the epoch."""


@runtime_checkable
class ConversationIndex(Protocol):
    """A history store that can list its conversations (the operator console's conversation search)."""

    async def conversations(self, *, words: str = "", limit: int = 50) -> list[ConversationInfo]:
        """The conversations with an entry containing every word of ``words`` as a whole word (all of them when
        empty), the most recently active first."""
        ...


_WORD = re.compile(r"\w+", re.UNICODE)


def query_words(words: str, *, most: int = 8) -> list[str]:
    """The searchable words of a query (letters and digits, lower case, at most ``most``)."""
    return [w.lower() for w in _WORD.findall(words)][:most]


FOREVER = 2**62
"""A bound past any timestamp, for a time range left open."""

HISTORY: Slot[HistoryStore] = Slot("history")
"""Where the ``LongMemory`` plugin keeps every input and output (``agent.provided(HISTORY)``; None: only the working
memory is kept)."""


def time_range(since: int | None, until: int | None) -> tuple[int, int]:
    """``(low, high)`` of a search's time range (milliseconds), an open end made ``-FOREVER`` or ``FOREVER``."""
    return (since if since is not None else -FOREVER, until if until is not None else FOREVER)


def excerpt(text: str, words: Sequence[str], *, width: int = 200) -> str:
    """At most ``width`` characters of ``text`` around the first of ``words`` it contains."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    lower = text.lower()
    at = min((i for i in (lower.find(w) for w in words) if i >= 0), default=0)
    start = max(0, min(at - width // 3, len(text) - width))
    cut = text[start : start + width]
    return ("…" if start else "") + cut + ("…" if start + width < len(text) else "")
