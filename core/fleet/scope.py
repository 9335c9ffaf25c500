"""What a worker knows while it runs one batch of one context: its lease, the batch, the writes to
commit with the acknowledgement, and the stored answers of an earlier attempt.

The scope travels in a ``ContextVar``: the drain job sets it before ``agent.run`` and the run's task
inherits it, so the memory store, the reply ledger and the replaying model find it without any
change to the agent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..errors import DispatchError
from .backend import RedisBackend
from .keys import ContextKeys

__all__ = ("MARK_DELAY", "Lease", "RunScope", "current_scope")

log = logging.getLogger("core.fleet.reply_ledger")

MARK_DELAY = 0.05
"""Seconds a posted mark waits for another round trip to travel with before it is written alone."""

_scope: ContextVar[RunScope | None] = ContextVar("core_redis_scope", default=None)


def current_scope() -> RunScope | None:
    """The scope of the batch being run in this task, if any."""
    return _scope.get()


@dataclass(kw_only=True, eq=False)
class Lease:
    """This worker's hold on a context, as far as this worker can tell."""

    cid: str
    """The context."""
    token: str
    """The fencing token: every write the holder makes is checked against it."""
    job_id: str
    """The drain job holding the lease."""
    owner: str = ""
    """``<job id>#<nonce>``: who claimed, so a claim sent again after a lost reply is recognised."""
    seconds: float
    """The lease length."""
    deadline: float = 0.0
    """``time.monotonic()`` after which the lease may have expired (a safety margin taken off)."""
    lost: bool = False
    """True once a renewal was refused or the deadline passed without one."""
    ended: bool = False
    """True once the drain job is over (released, handed off or given up): nothing to renew."""
    quiet_ms: int = 0
    """The quiet window a take of this job found (``core.busy``): later takes look at the burst's times too."""
    on_lost: Callable[[], None] | None = field(default=None, repr=False)
    """Told when the holder gives the lease up itself (``give_up``): the drain job cancels the run."""

    @property
    def fence(self) -> str:
        """What the fenced scripts check: ``<token>|<owner>``, the whole lease value."""
        return f"{self.token}|{self.owner}" if self.owner and self.token else self.token

    def extended(self, sent_at: float) -> None:
        """A renewal (or claim) sent at ``sent_at`` succeeded."""
        margin = min(0.5, self.seconds * 0.1)
        self.deadline = max(self.deadline, sent_at + self.seconds - margin)

    @property
    def valid(self) -> bool:
        """Whether this worker may still act for the context."""
        return not self.lost and time.monotonic() < self.deadline

    def still_held(self) -> bool:
        """``valid``, and once it is not, never again: a worker that found its lease may have expired (it was
        paused, starved of CPU or cut off) stops renewing it and its run is cancelled, so the batch goes to
        the next holder whole. A renewal that came through a moment later must not let the run go on: it
        may already have left a reply half shown (not edited to its final text) and carried on."""
        if self.valid:
            return True
        self.give_up()
        return False

    def give_up(self) -> None:
        """Hold the context no more, for good: the run is cancelled (``on_lost``), the lease is not renewed, and
        the batch, not acknowledged, goes whole to the next holder once the lease expires."""
        if not self.lost and not self.ended and self.on_lost is not None:
            self.on_lost()
        self.lost = True


@dataclass(kw_only=True, eq=False)
class RunScope:
    """One attempt at one batch."""

    backend: RedisBackend
    """The connection."""
    keys: ContextKeys
    """The context's keys."""
    lease: Lease
    """The hold on the context."""
    batch_id: str
    """The batch being answered (the same on every redelivery)."""
    attempt: int
    """1 for the first delivery, more for a redelivery."""
    take: str = ""
    """The take's token (random, the same on every redelivery of this take; '' for a batch an older worker took):
    the batch id alone may be handed out again after a failover, to another take (``core.fleet.scripts``)."""
    cache: dict[str, str] = field(default_factory=dict)
    """The ledger of an earlier attempt: model answers (``m<step>``), the ids of the inputs each step read
    (``m<step>:in``) and replies (``r<step>.<n>``)."""
    replayed_inputs: set[str] = field(default_factory=set)
    """Ids of the inputs read by the steps this attempt replayed (as the earlier attempt recorded them): a part of
    the batch they cover all of was answered already (``Drainer``)."""
    staged: dict[str, str | None] = field(default_factory=dict)
    """Memory writes to commit with the acknowledgement (Redis key -> JSON, or None to delete)."""
    loaded: dict[str, str | None] = field(default_factory=dict)
    """Memory values read together with the batch (Redis key -> JSON, or None when absent)."""
    usage: dict[str, list[int]] = field(default_factory=dict)
    """Usage counted while the batch runs, added by its acknowledgement (Redis key of a day's counters ->
    ``[tokens in, tokens out, cost]``): a batch is acknowledged once, so it is counted once, without a key per
    call to remember what was counted."""
    step: int = 0
    """Steps of the model so far in this attempt (a call started again with inputs that joined it, ``core.busy``,
    is the same step)."""
    replies: int = 0
    """Replies begun in the current step."""
    text: list[str] = field(default_factory=list)
    """The model's answer in the current step so far."""
    marks: dict[str, str] = field(default_factory=dict)
    """Replies marked posted, not written yet: they travel with this run's next round trip to Redis
    (the next reply, the next model call, the acknowledgement, which drops the ledger anyway), or are
    written on their own after ``MARK_DELAY`` seconds if no such trip comes first."""
    _flusher: asyncio.Task[None] | None = field(default=None, repr=False)

    def count_usage(self, key: str, input_tokens: int, output_tokens: int, cost: int) -> None:
        """Add a call's usage under ``key`` to what the acknowledgement adds (see ``usage``)."""
        counts = self.usage.setdefault(key, [0, 0, 0])
        counts[0] += input_tokens
        counts[1] += output_tokens
        counts[2] += cost

    def mark(self, name: str, reply: str) -> None:
        """Record a reply as posted (see ``marks``)."""
        self.marks[name] = reply
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later(), name="ledger-marks")

    async def _flush_later(self) -> None:
        await asyncio.sleep(MARK_DELAY)
        try:
            await self.flush_marks()
        except DispatchError as exc:
            log.warning("could not record posted replies of %s (%s); retrying with the next call", self.keys.cid, exc)

    async def record(self, name: str, reply: str) -> None:
        """Write a reply's entry now (with any marks still waiting); if Redis fails, it stays among the
        marks and goes with the next round trip (see ``marks``)."""
        self.marks[name] = reply
        try:
            await self.flush_marks()
        except DispatchError as exc:
            log.warning("could not record a reply of %s (%s); retrying with the next call", self.keys.cid, exc)
            self.mark(name, self.marks.get(name, reply))

    async def flush_marks(self) -> None:
        """Write the marks now (not fenced: a mark records a fact, even from a worker that lost its
        lease meanwhile, as long as the batch is still this take). Marks that could not be written stay for
        the next try. Marks the batch refused (another take holds it: a Redis failover lost this one, and its
        id was handed out again) are dropped and the lease is given up: the run is cancelled, it posts no more."""
        if not self.marks:
            return
        b = self.backend
        sent = dict(self.marks)
        pairs = [item for pair in sent.items() for item in pair]
        written = await b.call(
            b.mark_posted,
            [self.ledger_key, self.keys.batch],
            [self.take, *pairs],
            what=f"marking replies of {self.keys.cid} as posted",
            confirm=True,
        )
        for name, value in sent.items():
            if self.marks.get(name) == value:
                del self.marks[name]
        if written == -1:
            if not self.lease.lost:
                log.warning(
                    "batch %s of %s is another take now (a Redis failover lost this one): its posted replies are not "
                    "recorded there, and the run is given up",
                    self.batch_id,
                    self.keys.cid,
                )
            self.lease.give_up()

    async def close(self, *, acknowledged: bool) -> None:
        """End the attempt: after an acknowledgement the marks are moot (the ledger is gone); otherwise
        they are written now, since the batch will come again and must know what was posted."""
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
            self._flusher = None
        if acknowledged:
            self.marks.clear()
        else:
            await self.flush_marks()

    @property
    def ledger_key(self) -> str:
        """Where this batch's answers and replies are kept until it is acknowledged."""
        return self.keys.ledger(self.batch_id)

    def enter(self) -> object:
        """Make this the current scope; returns the token for ``exit``."""
        return _scope.set(self)

    @staticmethod
    def exit(token: object) -> None:
        """Restore the previous scope."""
        _scope.reset(token)  # type: ignore[arg-type]
