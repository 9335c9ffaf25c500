"""A circuit breaker per model of a chain: a model that keeps failing is paused instead of costing every call a
timeout, then given one trial call.

closed --(``failures`` failures within ``window`` seconds)--> open --(``pause`` seconds)--> half-open
half-open --(the trial call answers)--> closed;  half-open --(it fails)--> open again

Only transient failures count (a timeout, a 429, a 5xx, a refused connection, a dropped stream); an answer
clears the count. One breaker lives in one process: each worker of a fleet judges the models for itself.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ("BreakerPolicy", "BreakerState", "CircuitBreaker")


@dataclass(frozen=True, kw_only=True)
class BreakerPolicy:
    """When a model is paused, and for how long."""

    failures: int = 3
    """Failures within ``window`` that pause the model (``LLM_BREAKER_FAILURES``; 0: never paused)."""
    window: float = 60.0
    """Seconds over which failures are counted (``LLM_BREAKER_WINDOW``)."""
    pause: float = 30.0
    """Seconds a paused model is skipped before one trial call (``LLM_BREAKER_PAUSE``)."""


class BreakerState(enum.StrEnum):
    """Where a breaker is."""

    CLOSED = "closed"
    """The model is asked."""
    OPEN = "open"
    """The model is paused: skipped until its pause ends."""
    HALF_OPEN = "half_open"
    """The pause ended: one call tries the model while the others still skip it."""


class CircuitBreaker:
    """The breaker of one model. Its methods never wait, so one event loop needs no lock around them."""

    def __init__(self, policy: BreakerPolicy, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        """Its thresholds."""
        self.clock = clock
        """Seconds of a monotonic clock (tests step it instead of sleeping)."""
        self._failures: deque[float] = deque()
        self._opened_at: float | None = None
        self._trial = False

    @property
    def state(self) -> BreakerState:
        """Closed, open, or half-open once the pause has ended."""
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self.clock() - self._opened_at < self.policy.pause:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    def reopens_in(self) -> float:
        """Seconds until the paused model is tried again (0 when it is not paused)."""
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._opened_at + self.policy.pause - self.clock())

    def allows(self) -> bool:
        """May a call go to the model now? Closed: yes; open: no; half-open: yes for one trial call at a time,
        which must end in ``succeeded``, ``failed`` or ``released``."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.OPEN or self._trial:
            return False
        self._trial = True
        return True

    def succeeded(self) -> None:
        """The model answered: the breaker closes and its failures are forgotten."""
        self._failures.clear()
        self._opened_at = None
        self._trial = False

    def failed(self) -> bool:
        """The model failed transiently: a failed trial reopens the breaker, enough failures open it. True when
        this failure paused the model."""
        now = self.clock()
        if self._opened_at is not None:
            self._opened_at = now  # the trial failed (or a call let through before the pause): pause again
            self._trial = False
            return True
        if self.policy.failures <= 0:
            return False
        self._failures.append(now)
        while self._failures and now - self._failures[0] > self.policy.window:
            self._failures.popleft()
        if len(self._failures) < self.policy.failures:
            return False
        self._failures.clear()
        self._opened_at = now
        return True

    def released(self) -> None:
        """The call ended without a verdict (cancelled, or a failure that says nothing of the model's health):
        a trial slot is given back."""
        self._trial = False
