"""Memory stores: where context memory and working memory are kept between runs, and the full history."""

from .base import MemoryStore
from .history import ConversationIndex, ConversationInfo, HistoryEntry, HistoryStore, Summary
from .in_memory import InMemoryStore
from .sqlite import SQLiteStore
from .sqlite_history import SQLiteHistory

__all__ = (
    "ConversationIndex",
    "ConversationInfo",
    "HistoryEntry",
    "HistoryStore",
    "InMemoryStore",
    "MemoryStore",
    "SQLiteHistory",
    "SQLiteStore",
    "Summary",
)
