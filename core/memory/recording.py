"""What a run adds to the full history, and the retention sweep that removes old history.

A run's inputs and delivered outputs become ``HistoryEntry`` rows when the run ends (before its memory
is saved, so a queued batch is stored before it is acknowledged). Ids are stable across a redelivery:
an input keeps its id (prefixed with the platform's message id where it has one, ``history_id``, so a message its
author deleted is found in the history however old it is), an output of a queued batch is named after the batch and
its rank, so a batch run twice is stored once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from ..definitions import ContextState
from ..entries import InputRef, Log, OutputRef, now_ms
from ..media.attachment import describe
from ..prompt import format_value
from ..reply_ledger import BATCH
from .history import HistoryEntry, HistoryStore, message_prefix

__all__ = ("RetentionSweeper", "history_entries", "history_id")

log = logging.getLogger("core.memory.recording")

DAY_MS = 86_400_000


def history_id(entry: InputRef) -> str:
    """The id an input has in the history: its own, after its platform message's (``message_prefix``) if it has one."""
    message_id = entry.params.get("message_id")
    return f"{message_prefix(str(message_id))}{entry.id}" if message_id else entry.id


def history_entries(state: ContextState, chain: Sequence[Log]) -> list[HistoryEntry]:
    """The entries of ``chain`` (one run of ``state``) worth keeping: inputs and delivered outputs."""
    batch = state.values.get(BATCH)
    out: list[HistoryEntry] = []
    outputs = 0
    for entry in chain:
        if isinstance(entry, InputRef):
            text = entry.text if entry.text is not None else format_value(entry.data)
            notes = " ".join(f"[{describe(a)}]" for a in entry.attachments)
            who = entry.params.get("user") or entry.params.get("author") or entry.params.get("username") or "user"
            out.append(
                HistoryEntry(
                    id=history_id(entry), ts=entry.timestamp, role="user", who=who, text=f"{text} {notes}".strip()
                )
            )
        elif isinstance(entry, OutputRef) and entry.error is None:
            outputs += 1
            text = (
                entry.text
                if entry.text is not None
                else (entry.content if entry.data is None else format_value(entry.data))
            )
            key = f"{batch}/o{outputs}" if batch else entry.id
            out.append(HistoryEntry(id=key, ts=entry.timestamp, role="assistant", who="assistant", text=text))
    return out


class RetentionSweeper:
    """Deletes history older than ``days`` days now and then (every ``every`` seconds), in a task it owns.
    Any process may sweep: deleting what is already gone is harmless."""

    def __init__(self, history: HistoryStore, *, days: int, every: float = 3600.0) -> None:
        self.history = history
        """The store swept."""
        self.days = days
        """How long history is kept (0: forever, nothing is swept)."""
        self.every = every
        """Seconds between sweeps."""
        self.removed = 0
        """Entries removed by this sweeper."""
        self._task: asyncio.Task[None] | None = None

    async def sweep(self) -> int:
        """Remove what is older than ``days`` now; returns how many entries."""
        if self.days <= 0:
            return 0
        n = await self.history.prune(before=now_ms() - self.days * DAY_MS)
        self.removed += n
        if n:
            log.info("history retention: removed %d entries older than %d days", n, self.days)
        return n

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception as exc:
                log.warning("history retention sweep failed (tried again in %.0fs): %s", self.every, exc)
            await asyncio.sleep(self.every)

    async def start(self, _agent: Any = None) -> None:
        """Start sweeping in the background (a service's ``start``)."""
        if self.days > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="history-retention")

    async def stop(self, _agent: Any = None) -> None:
        """Stop sweeping (a service's ``stop``)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
