"""The facts plugin: keeps what people ask the bot to remember in a ``FactStore``, each fact its owner's, and shows
each run the facts of whoever is asking (their own and the group's) before every model call (``ContextState.facts``:
the prompt's facts). ``/reset`` and ``/forget`` erase a conversation's facts (``Plugin.reset``). ``facts_of(agent)``
is how the actions, the chat commands and the platforms reach it.

    facts = Facts()                                   # in the agent's memory store (one process)
    agent = create_agent(..., plugins=[facts])
    Facts(core.fleet.RedisFactStore(backend))         # in a fleet: every gateway and worker

It also takes over the facts of the memory dict where ``remember`` kept them before (``memory["facts"]``, plain
strings): when a conversation's state is next loaded they move into the store as group facts of no known owner (the
whole conversation saw them before; nobody's ``/memory`` lists them; ``/forget`` erases them with the conversation).
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, MemoryStoreError
from ..plugin import Plugin, RunHooks, RunView
from ..usage import user_of
from .model import Fact, FactScope, author_of, visible
from .store import FactStore, MemoryFactStore

if TYPE_CHECKING:
    from ..definition_types import Host
    from ..entries import Log
    from ..handler_context import ContextState

__all__ = ("MAX_FACTS", "Facts", "facts_of")

log = logging.getLogger("core.facts")

MAX_FACTS = 50
"""Facts one conversation keeps at most (the newest)."""

_kept: weakref.WeakKeyDictionary[Any, Facts] = weakref.WeakKeyDictionary()


def facts_of(agent: Host) -> Facts | None:
    """The facts of ``agent`` (the ``Facts`` plugin it was built with), or None."""
    return _kept.get(agent)


class Facts(Plugin):
    """Facts people asked the bot to keep, each its owner's, in ``store`` (default: the agent's memory store, one
    process only), at most ``limit`` per conversation."""

    name = "facts"

    def __init__(self, store: FactStore | None = None, *, limit: int = MAX_FACTS) -> None:
        self._store = store
        self.limit = limit
        """Facts one conversation keeps at most (the newest)."""

    @property
    def store(self) -> FactStore:
        """Where the facts are kept."""
        if self._store is None:
            raise ConfigError("these Facts are installed on no agent: pass them in create_agent(plugins=[...])")
        return self._store

    def attach(self, host: Host) -> None:
        if self._store is None:
            if host.distributed:
                raise ConfigError(
                    "facts of an agent on a shared queue must live in Redis: pass "
                    "Facts(core.fleet.RedisFactStore(backend)) (bots.plugins.facts() does)"
                )
            self._store = MemoryFactStore(host.memory)
        _kept[host] = self

    def begin(self, run: RunView) -> RunHooks:
        return _Shown(self, run)

    async def loaded(self, state: ContextState[Any]) -> None:
        try:
            await self.take_over(state)
        except MemoryStoreError as exc:  # left in the memory dict: taken over at a later load
            log.warning("%s: its facts kept before owners could not be moved yet: %s", state.id, exc)

    async def reset(self, context_id: str, *, erase: bool) -> None:
        """``/reset`` and ``/forget``: the conversation's facts go (both forget what the conversation kept)."""
        await self.store.forget(context_id)

    # -- what the actions and commands do ----------------------------------------------------------------

    async def remember(self, state: ContextState[Any], text: str, *, scope: FactScope) -> Fact:
        """Keep ``text`` in the conversation of ``state``, owned by whoever the model is answering (the newest
        input it read with an author) and tied to that input's message; said where nobody is identified, the fact
        is the group's."""
        author = author_of(state.working_memory.logs, shown_only=True)
        owner = user_of(author) if author is not None else None
        fact = Fact(
            conversation=state.id,
            text=text,
            owner=owner,
            scope=scope if owner is not None else FactScope.GROUP,
            message=author.params.get("message_id") if author is not None else None,
        )
        return await self.store.add(fact, limit=self.limit)

    async def recall(self, state: ContextState[Any]) -> list[Fact]:
        """The facts of the conversation of ``state`` that whoever the model is answering may be shown."""
        author = author_of(state.working_memory.logs, shown_only=True)
        return visible(await self.store.of_conversation(state.id), user_of(author) if author is not None else None)

    async def take_over(self, state: ContextState[Any]) -> int:
        """Move the plain-string facts of the memory dict of ``state`` (kept before facts had owners) into the
        store, as group facts of no known owner; how many."""
        memory = state.memory
        old = memory.get("facts") if isinstance(memory, dict) else None
        if not isinstance(old, list):
            return 0
        moved = 0
        for item in old:
            if isinstance(item, str) and item.strip():
                await self.store.add(
                    Fact(conversation=state.id, text=item.strip(), scope=FactScope.GROUP), limit=self.limit
                )
                moved += 1
        del memory["facts"]
        if moved:
            log.info("%s: %d fact(s) kept before facts had owners are now the group's", state.id, moved)
        return moved


class _Shown(RunHooks):
    """Before each model call: the facts of whoever is asking, on the run's state for the prompt."""

    __slots__ = ("facts", "run")

    def __init__(self, facts: Facts, run: RunView) -> None:
        self.facts, self.run = facts, run

    async def admit(self, updates: list[Log]) -> list[Log]:
        state = self.run.state
        try:
            author = author_of(updates) or author_of(state.working_memory.logs, shown_only=True)
            asker = user_of(author) if author is not None else None
            shown = visible(await self.facts.store.of_conversation(state.id), asker)
        except MemoryStoreError as exc:  # the answer goes on without them
            log.warning("%s: the facts could not be read (%s); this answer is written without them", state.id, exc)
            shown = []
        state.facts = [f.text for f in shown]
        return updates
