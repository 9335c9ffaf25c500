"""Memory stores: where context memory and working memory are kept between runs."""

from .base import MemoryStore
from .in_memory import InMemoryStore
from .sqlite import SQLiteStore

__all__ = ("InMemoryStore", "MemoryStore", "SQLiteStore")
