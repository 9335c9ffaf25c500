"""What a worker knows while it runs one batch of one context: its lease, the batch, the writes to
commit with the acknowledgement, and the stored answers of an earlier attempt.

The scope travels in a ``ContextVar``: the drain job sets it before ``agent.run`` and the run's task
inherits it, so the memory store, the reply ledger and the replaying model find it without any
change to the agent.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field

from .backend import RedisBackend
from .keys import ContextKeys

__all__ = ("Lease", "RunScope", "current_scope")

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
    seconds: float
    """The lease length."""
    deadline: float = 0.0
    """``time.monotonic()`` after which the lease may have expired (a safety margin taken off)."""
    lost: bool = False
    """True once a renewal was refused or the deadline passed without one."""

    def extended(self, sent_at: float) -> None:
        """A renewal (or claim) sent at ``sent_at`` succeeded."""
        margin = min(0.5, self.seconds * 0.1)
        self.deadline = max(self.deadline, sent_at + self.seconds - margin)

    @property
    def valid(self) -> bool:
        """Whether this worker may still act for the context."""
        return not self.lost and time.monotonic() < self.deadline


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
    cache: dict[str, str] = field(default_factory=dict)
    """The ledger of an earlier attempt: model answers (``m<step>``) and replies (``r<step>.<n>``)."""
    staged: dict[str, str | None] = field(default_factory=dict)
    """Memory writes to commit with the acknowledgement (Redis key -> JSON, or None to delete)."""
    step: int = 0
    """Model calls made so far in this attempt."""
    replies: int = 0
    """Replies begun in the current step."""
    text: list[str] = field(default_factory=list)
    """The model's answer in the current step so far."""

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
