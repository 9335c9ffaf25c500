"""Facts: what people ask the bot to remember, each fact its owner's (``remember``, ``recall``, ``forget``,
``/memory``).

A fact records who said it (``owner``), for whom (``scope``: its owner alone, or everyone in its conversation) and
the message it came from. A run shows the model only the facts of whoever it answers: their own and the group's,
never another member's private ones; a platform that tells the bot a message was deleted (Discord) drops the facts
that came from it. The ``Facts`` plugin keeps them in a ``FactStore``: the agent's memory store in one process
(``MemoryFactStore``), Redis in a fleet (``core.fleet.RedisFactStore``).
"""

from .actions import ForgetArgs, RememberArgs, forget, recall, remember
from .model import Fact, FactScope, author_of, visible, visible_to_all
from .plugin import MAX_FACTS, Facts, facts_of
from .store import FactStore, MemoryFactStore

__all__ = (  # noqa: RUF022 (sorted as tests/test_public_api.py sorts: plain string order)
    "Fact",
    "FactScope",
    "FactStore",
    "Facts",
    "ForgetArgs",
    "MAX_FACTS",
    "MemoryFactStore",
    "RememberArgs",
    "author_of",
    "facts_of",
    "forget",
    "recall",
    "remember",
    "visible",
    "visible_to_all",
)
