"""The trace of each recent run of a conversation, kept while tracing is on, so an operator goes from a
conversation to its runs' traces (the console's conversation page links them to the trace viewer).

The memory store keeps, under ``traces:<context id>``, a short list (the newest ``RECENT_RUNS``) of the trace id,
start time and step count of each run; a run writes it after saving its state (one run at a time per
conversation, so the read-modify-write never races). While tracing is off nothing is written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .memory import MemoryStore

__all__ = ("RECENT_RUNS", "RunTrace", "recent_runs", "remember_run", "traces_key")

RECENT_RUNS = 20
"""How many runs of one conversation are kept (the oldest is dropped first)."""


@dataclass(frozen=True, kw_only=True)
class RunTrace:
    """One run of a conversation and its trace."""

    trace_id: str
    """The trace's id, 32 hex digits."""
    ts: int
    """When the run started, in ms since the epoch."""
    steps: int = 0
    """The steps the run took."""


def traces_key(cid: str) -> str:
    """The memory store key of the recent runs of ``cid``."""
    return f"traces:{cid}"


def _parse(item: Any) -> RunTrace | None:
    if not isinstance(item, dict):
        return None
    trace_id, ts, steps = item.get("trace_id"), item.get("ts"), item.get("steps", 0)
    if not isinstance(trace_id, str) or not isinstance(ts, int) or not isinstance(steps, int):
        return None
    return RunTrace(trace_id=trace_id, ts=ts, steps=steps)


async def recent_runs(memory: MemoryStore, cid: str) -> list[RunTrace]:
    """The recent runs of ``cid``, newest first (malformed entries are skipped)."""
    stored = await memory.get(traces_key(cid))
    if not isinstance(stored, list):
        return []
    found = [run for run in map(_parse, stored) if run is not None]
    return list(reversed(found))


async def remember_run(memory: MemoryStore, cid: str, run: RunTrace, *, keep: int = RECENT_RUNS) -> None:
    """Add ``run`` to the recent runs of ``cid``, keeping the newest ``keep``."""
    stored = await memory.get(traces_key(cid))
    items = [item for item in stored if _parse(item) is not None] if isinstance(stored, list) else []
    items.append(asdict(run))
    await memory.set(traces_key(cid), items[-keep:])
