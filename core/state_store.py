"""Where a context instance's state lives between runs: its memory, its working memory (the newest few kept loaded
in this process) and its state log, in the agent's memory store."""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .bot import own_args
from .chat_settings import ChatSettings
from .definitions import Context, ContextState, maybe_await
from .entries import WorkingMemory
from .memory_shape import Shape, current, shaped
from .run_traces import traces_key
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


_KEPT = "core.memory_shape.kept"
"""``state.options`` key: whose memory the instance held when loaded (a ``Shape``, None: unknown), so a save writes
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
        """How many contexts' working memories stay loaded between runs (0: always read from the store)."""
        self.cache_entries = cache_entries
        """How many log entries they may hold together; the least recently used go first past either bound."""
        self.state_log_limit = state_log_limit
        """A context's state log is compacted into snapshots when it grows past this many entries."""
        self._working: OrderedDict[str, tuple[WorkingMemory, int]] = OrderedDict()  # with its length when cached
        self._entries = 0

    async def load(self, context: Context, args: Any, *, cid: str, chat: ChatSettings, host: Host) -> ContextState:
        """The state of the instance ``cid`` (``context.load`` or the store; ``context.create`` makes a new
        one's memory, and memory kept by another bot or an older version is brought to its shape), with its
        conversation's settings. ``args`` are the platform's when ``context`` lays a bot's over
        a platform's: the state's ``args`` are then the bot's own (``core.bot.own_args``)."""
        kept: Shape | None = None
        if context.load is not None:
            stored = await maybe_await(context.load(cid, host))
        else:
            stored = await self.memory.get(f"context:{cid}")
            if stored is not None:
                kept = Shape.load(await self.memory.get(f"shape:{cid}"))
        working = self._take(cid)
        if context.working_memory == "run":  # temporary for this run: nothing of the last run's is shown
            working = WorkingMemory(limit=context.keep_logs)
        elif working is None:
            raw_logs = await self.memory.get(f"working:{cid}")
            working = WorkingMemory.load(raw_logs, limit=context.keep_logs)
        state = ContextState(
            id=cid,
            context=context,
            args=own_args(context, args),
            platform_args=args,
            key=context.key(args),
            memory=None,
            working_memory=working,
            state_log=StateLog.load(await self.memory.get(f"statelog:{cid}")),
            chat=chat,
        )
        if stored is None:
            stored = await maybe_await(context.create(state)) if context.create is not None else {}
        else:  # (a copy: a run that fails half-way must not change the stored value)
            stored = copy.deepcopy(stored)
            if context.load is None:
                if not current(kept, context):  # (in its shape already: handed over as it is)
                    stored = await shaped(stored, kept, state)
                state.options[_KEPT] = kept
        state.memory = stored
        return state

    async def save(self, state: ContextState, *, host: Host) -> None:
        """Save the instance's memory (``context.save`` or the store), its trimmed working memory and its state
        log when it changed."""
        state.working_memory.trim()
        if state.context.save is not None:
            await maybe_await(state.context.save(state, host))
        else:
            memory = state.memory.model_dump(mode="json") if hasattr(state.memory, "model_dump") else state.memory
            await self.memory.set(f"context:{state.id}", copy.deepcopy(memory))
            if not current(state.options.get(_KEPT), state.context):
                shape = Shape.of(state.context)
                await self.memory.set(f"shape:{state.id}", shape.dump())
                state.options[_KEPT] = shape
        await self.memory.set(f"working:{state.id}", state.working_memory.dump())
        if state.state_log.dirty:
            if len(state.state_log.entries) > self.state_log_limit:
                state.state_log.compact()
            await self.memory.set(f"statelog:{state.id}", state.state_log.dump())
            state.state_log.dirty = False
        if self.cache and state.context.working_memory == "window":  # (a run's own is never loaded again)
            self._take(state.id)
            size = len(state.working_memory.logs)
            self._working[state.id] = (state.working_memory, size)
            self._entries += size
            while self._working and (len(self._working) > self.cache or self._entries > self.cache_entries):
                self._entries -= self._working.popitem(last=False)[1][1]

    def _take(self, cid: str) -> WorkingMemory | None:
        cached = self._working.pop(cid, None)
        if cached is None:
            return None
        self._entries -= cached[1]
        return cached[0]

    def uncache(self, cid: str) -> None:
        """Forget the working memory kept loaded for ``cid`` (it may hold half a run, or is being reset)."""
        self._take(cid)

    async def delete(self, cid: str) -> None:
        """Erase the memory, working memory, state log and recent runs' traces of ``cid``."""
        self.uncache(cid)
        await self.memory.delete(f"context:{cid}")
        await self.memory.delete(f"shape:{cid}")
        await self.memory.delete(f"working:{cid}")
        await self.memory.delete(f"statelog:{cid}")
        await self.memory.delete(traces_key(cid))
