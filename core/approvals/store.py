"""Where pending approvals live: the ``ApprovalStore`` protocol, and the store of one process kept in its memory
store (``bots run``; SQLite survives a restart). The fleet's store is ``core.fleet.approval_store``.

Every change of status is a compare-and-set, so of two presses (or a press and the timeout, or two workers) one
decides, and an approved call is started once: ``decide`` (pending -> approved, denied or expired), ``start``
(approved -> running), ``finish`` (-> done). ``due`` hands out what needs a look: pending requests past their
timeout, and decisions whose conversation has not been told yet (sent again: the dedupe key drops a copy)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, Protocol, runtime_checkable

from ..memory import MemoryStore
from .model import Approval, ApprovalStatus, Decision

__all__ = ("ApprovalStore", "MemoryApprovalStore")

INDEX_KEY = "approvals"
"""The memory-store key of the list of open approval ids."""
KEY_PREFIX = "approval:"
"""The memory-store key of one approval is this and its id."""
DONE_KEPT = 1000
"""Settled approvals kept in memory (a late press is told it was settled), the oldest forgotten first."""


@runtime_checkable
class ApprovalStore(Protocol):
    """Approvals by id, and the ones due for a look."""

    async def add(self, approval: Approval) -> bool:
        """Store a new pending ``approval`` (due at its ``expires_at``); False (nothing changed) when one with its
        id exists already."""
        ...

    async def get(self, approval_id: str) -> Approval | None:
        """The approval ``approval_id`` (pending, decided, or done a while ago), or None."""
        ...

    async def set_prompt(self, approval_id: str, prompt: str) -> Approval | None:
        """Remember where the request was posted: the approval with its prompt, its status the one it had when the
        prompt was noted (a decision made before did not see it); None when it is unknown."""
        ...

    async def decide(
        self, approval_id: str, decision: Decision, *, by: str | None, name: str, at: float, retry_at: float
    ) -> Approval | None:
        """Pending -> ``decision``, by ``by`` at ``at`` (due again at ``retry_at`` until ``finish``): the decided
        approval, or None when it was not pending (decided already, or unknown)."""
        ...

    async def start(self, approval_id: str) -> Approval | None:
        """Approved -> running (no longer due: a caller that dies now leaves its batch to be delivered again,
        which finds the call running and says its outcome is unknown): the approval when this caller is to run
        the call, else None."""
        ...

    async def finish(self, approval_id: str, outcome: dict[str, Any] | None) -> None:
        """-> done, with the call's ``outcome``; no longer due."""
        ...

    async def pending(self, conversation: str) -> list[Approval]:
        """The requests of ``conversation`` still waiting for an approver."""
        ...

    async def due(self, now: float, *, limit: int) -> list[Approval]:
        """Up to ``limit`` approvals due at ``now`` (pending past their timeout, decided and not told yet)."""
        ...

    async def retry_at(self, approval_id: str, at: float) -> None:
        """Look at a decided approval again at ``at`` (its conversation was sent the decision again)."""
        ...

    async def next_due(self) -> float | None:
        """When the soonest approval is due (None: none open)."""
        ...


class MemoryApprovalStore:
    """The approvals of one process, kept in its memory store: each under ``approval:<id>``, the open ones'
    ids under ``approvals`` (a settled one is dropped there, and kept in this process's memory a while). Loaded
    once, then served from memory; every change is written through. One process owns the memory
    store (``bots run``): in a fleet, use ``core.fleet.RedisApprovalStore``."""

    def __init__(self, memory: MemoryStore) -> None:
        self.memory = memory
        """Where the approvals are written."""
        self._items: dict[str, Approval] | None = None
        self._due: dict[str, float] = {}
        self._done: OrderedDict[str, Approval] = OrderedDict()
        self._lock = asyncio.Lock()

    async def _load(self) -> dict[str, Approval]:
        if self._items is None:
            items: dict[str, Approval] = {}
            for aid in await self.memory.get(INDEX_KEY) or []:
                raw = await self.memory.get(KEY_PREFIX + aid)
                if raw is not None:
                    found = Approval.model_validate(raw)
                    items[aid] = found
                    self._due[aid] = found.expires_at if found.status is ApprovalStatus.PENDING else 0.0
            self._items = items
        return self._items

    async def _write(self, approval: Approval, *, index: bool = False) -> None:
        items = await self._load()
        items[approval.id] = approval
        await self.memory.set(KEY_PREFIX + approval.id, approval.to_json())
        if index:
            await self.memory.set(INDEX_KEY, list(items))

    async def add(self, approval: Approval) -> bool:
        async with self._lock:
            if approval.id in await self._load() or approval.id in self._done:
                return False
            self._due[approval.id] = approval.expires_at
            await self._write(approval, index=True)
            return True

    async def get(self, approval_id: str) -> Approval | None:
        async with self._lock:
            return (await self._load()).get(approval_id) or self._done.get(approval_id)

    async def set_prompt(self, approval_id: str, prompt: str) -> Approval | None:
        async with self._lock:
            found = (await self._load()).get(approval_id)
            if found is None:
                return None
            noted = found.model_copy(update={"prompt": prompt})
            await self._write(noted)
            return noted

    async def decide(
        self, approval_id: str, decision: Decision, *, by: str | None, name: str, at: float, retry_at: float
    ) -> Approval | None:
        async with self._lock:
            found = (await self._load()).get(approval_id)
            if found is None or found.status is not ApprovalStatus.PENDING:
                return None
            decided = found.model_copy(
                update={
                    "status": ApprovalStatus(decision.value),
                    "decided_by": by,
                    "decider": name,
                    "decided_at": at,
                }
            )
            self._due[approval_id] = retry_at
            await self._write(decided)
            return decided

    async def start(self, approval_id: str) -> Approval | None:
        async with self._lock:
            found = (await self._load()).get(approval_id)
            if found is None or found.status is not ApprovalStatus.APPROVED:
                return None
            running = found.model_copy(update={"status": ApprovalStatus.RUNNING})
            self._due.pop(approval_id, None)  # a worker that dies now: its batch, delivered again, says so
            await self._write(running)
            return running

    async def finish(self, approval_id: str, outcome: dict[str, Any] | None) -> None:
        async with self._lock:
            items = await self._load()
            found = items.pop(approval_id, None)
            self._due.pop(approval_id, None)
            if found is None:
                return
            self._done[approval_id] = found.model_copy(update={"status": ApprovalStatus.DONE, "outcome": outcome})
            while len(self._done) > DONE_KEPT:
                self._done.popitem(last=False)
            await self.memory.set(INDEX_KEY, list(items))
            await self.memory.delete(KEY_PREFIX + approval_id)

    async def pending(self, conversation: str) -> list[Approval]:
        async with self._lock:
            items = await self._load()
            return [a for a in items.values() if a.conversation == conversation and a.status is ApprovalStatus.PENDING]

    async def due(self, now: float, *, limit: int) -> list[Approval]:
        async with self._lock:
            items = await self._load()
            ids = sorted((at, aid) for aid, at in self._due.items() if at <= now and aid in items)[: max(0, limit)]
            return [items[aid] for _, aid in ids]

    async def retry_at(self, approval_id: str, at: float) -> None:
        async with self._lock:
            if approval_id in self._due:
                self._due[approval_id] = at

    async def next_due(self) -> float | None:
        async with self._lock:
            await self._load()
            return min(self._due.values(), default=None)
