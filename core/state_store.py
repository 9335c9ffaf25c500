"""Where a context instance's state lives between runs: its memory, its working memory and its state log, in the
agent's memory store; those of the newest few conversations are also kept loaded in this process."""

from __future__ import annotations

import copy
import dataclasses
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .bot import own_args
from .chat_settings import ChatSettings
from .definitions import Context, ContextState, maybe_await
from .entries import WorkingMemory
from .memory_shape import Shape, current, shaped
from .run_traces import traces_key
from .slots import Slot
from .statelog import StateLog

if TYPE_CHECKING:
    from .definition_types import Host
    from .memory import MemoryStore

__all__ = ("CACHE_ENTRIES", "StateStore")

CACHE_ENTRIES = 20_000
"""At most this many log entries in the working memories kept loaded between runs, all contexts together. A
loaded entry costs about 2 KB (the model, its JSON form kept for the next save), so the cache holds about 40 MB
however long its conversations are: bounded by conversations alone (1,024 of up to ``keep_logs`` 200 entries), it
grew to about 400 MB as they lengthened."""


@dataclasses.dataclass(slots=True, kw_only=True)
class _Loaded:
    """What the last save of one conversation wrote, kept loaded for its next run: what the store holds, without
    reading it back (three reads, each a thread's round trip with SQLite, before the model is called)."""

    working: WorkingMemory
    """Its working memory."""
    size: int
    """Its entries when kept (what it counts against ``cache_entries``)."""
    memory: Any = None
    """The memory saved (None with ``saved`` False)."""
    shape: Shape | None = None
    """Whose memory it is."""
    state_log: StateLog | None = None
    """The state log saved."""
    saved: bool = False
    """The memory, shape and state log are kept too (the context has neither its own ``load`` nor ``save``: the
    store holds what this process wrote)."""


_KEPT: Slot[Shape | None] = Slot("core.memory_shape.kept")
"""Kept in ``state.values``: whose memory the instance held when loaded (a ``Shape``, None: unknown), so a save writes
the shape only when it changed."""


class StateStore:
    """Loads and saves context instances' state (keys ``context:<id>``, ``shape:<id>`` (whose memory it is,
    ``core.memory_shape``), ``working:<id>``, ``statelog:<id>``;
    ``delete`` also erases ``traces:<id>``, the runs' traces of ``core.run_traces``)."""

    def __init__(
        self, memory: MemoryStore, *, cache: int, cache_entries: int = CACHE_ENTRIES, state_log_limit: int = 100
    ) -> None:
        self.memory = memory
        """The memory store."""
        self.cache = cache
        """How many contexts' state stays loaded between runs (0: always read from the store): their working memory,
        and, unless the context loads and saves its memory itself, their memory and state log as last saved (only
        this process writes them while its dispatcher is in-process: a fleet's workers set 0)."""
        self.cache_entries = cache_entries
        """How many log entries they may hold together; the least recently used go first past either bound."""
        self.state_log_limit = state_log_limit
        """A context's state log is compacted into snapshots when it grows past this many entries."""
        self._working: OrderedDict[str, _Loaded] = OrderedDict()
        self._entries = 0

    async def load(self, context: Context, args: Any, *, cid: str, chat: ChatSettings, host: Host) -> ContextState:
        """The state of the instance ``cid`` (``context.load`` or the store; ``context.create`` makes a new
        one's memory, and memory kept by another bot or an older version is brought to its shape), with its
        conversation's settings. ``args`` are the platform's when ``context`` lays a bot's over
        a platform's: the state's ``args`` are then the bot's own (``core.bot.own_args``)."""
        kept: Shape | None = None
        loaded = self._take(cid)
        if context.load is not None:
            stored = await maybe_await(context.load(cid, host))
        elif loaded is not None and loaded.saved:
            stored, kept = loaded.memory, loaded.shape
        else:
            stored = await self.memory.get(f"context:{cid}")
            if stored is not None:
                kept = Shape.load(await self.memory.get(f"shape:{cid}"))
        working = loaded.working if loaded is not None else None
        if context.working_memory == "run":  # temporary for this run: nothing of the last run's is shown
            working = WorkingMemory(limit=context.keep_logs)
        elif working is None:
            raw_logs = await self.memory.get(f"working:{cid}")
            working = WorkingMemory.load(raw_logs, limit=context.keep_logs)
        if loaded is not None and loaded.state_log is not None:
            state_log = loaded.state_log
        else:
            state_log = StateLog.load(await self.memory.get(f"statelog:{cid}"))
        state = ContextState(
            id=cid,
            context=context,
            args=own_args(context, args),
            platform_args=args,
            key=context.key(args),
            memory=None,
            working_memory=working,
            state_log=state_log,
            chat=chat,
        )
        if stored is None:
            stored = await maybe_await(context.create(state)) if context.create is not None else {}
        else:  # (a copy: a run that fails half-way must not change the stored value)
            stored = copy.deepcopy(stored)
            if context.load is None:
                if not current(kept, context):  # (in its shape already: handed over as it is)
                    stored = await shaped(stored, kept, state)
                state.values.put(_KEPT, kept)
        state.memory = stored
        return state

    async def save(self, state: ContextState, *, host: Host) -> None:
        """Save the instance's memory (``context.save`` or the store), its trimmed working memory and its state
        log when it changed."""
        state.working_memory.trim()
        memory: Any = None
        if state.context.save is not None:
            await maybe_await(state.context.save(state, host))
        else:
            memory = state.memory.model_dump(mode="json") if hasattr(state.memory, "model_dump") else state.memory
            memory = copy.deepcopy(memory)
            await self.memory.set(f"context:{state.id}", memory)
            if not current(state.values.get(_KEPT), state.context):
                shape = Shape.of(state.context)
                await self.memory.set(f"shape:{state.id}", shape.dump())
                state.values.put(_KEPT, shape)
        await self.memory.set(f"working:{state.id}", state.working_memory.dump())
        if state.state_log.dirty:
            if len(state.state_log.entries) > self.state_log_limit:
                state.state_log.compact()
            await self.memory.set(f"statelog:{state.id}", state.state_log.dump())
            state.state_log.dirty = False
        if self.cache and state.context.working_memory == "window":  # (a run's own is never loaded again)
            self._take(state.id)
            size = len(state.working_memory.logs)
            saved = state.context.load is None and state.context.save is None  # (the store holds ``memory``)
            self._working[state.id] = _Loaded(
                working=state.working_memory,
                size=size,
                memory=memory if saved else None,
                shape=state.values.get(_KEPT) if saved else None,
                state_log=state.state_log if saved else None,
                saved=saved,
            )
            self._entries += size
            while self._working and (len(self._working) > self.cache or self._entries > self.cache_entries):
                self._entries -= self._working.popitem(last=False)[1].size

    def _take(self, cid: str) -> _Loaded | None:
        cached = self._working.pop(cid, None)
        if cached is not None:
            self._entries -= cached.size
        return cached

    def uncache(self, cid: str) -> None:
        """Forget the state kept loaded for ``cid`` (it may hold half a run, or is being reset)."""
        self._take(cid)

    async def delete(self, cid: str) -> None:
        """Erase the memory, working memory, state log and recent runs' traces of ``cid``."""
        self.uncache(cid)
        await self.memory.delete(f"context:{cid}")
        await self.memory.delete(f"shape:{cid}")
        await self.memory.delete(f"working:{cid}")
        await self.memory.delete(f"statelog:{cid}")
        await self.memory.delete(traces_key(cid))
