"""At most one summary fold per conversation across workers: a Redis key set only if absent, with an
expiry (a killed worker's hold ends by itself), released only by its holder.

The hold is an optimisation (no two workers pay for the same model call); correctness comes from the
history store, which writes a summary only over the one it was computed from.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

from ..errors import DispatchError
from .backend import RedisBackend

__all__ = ("RedisSummaryLock",)

log = logging.getLogger("core.fleet.summary_lock")


class RedisSummaryLock:
    """``<prefix>lock:summary:<context id>``, held for at most ``ttl`` seconds per fold."""

    def __init__(self, backend: RedisBackend, *, ttl: float = 180.0) -> None:
        self.backend = backend
        """The connection."""
        self.ttl = ttl
        """Seconds a hold lasts at most (longer than a summary call may take)."""

    @contextlib.asynccontextmanager
    async def hold(self, cid: str) -> AsyncIterator[bool]:
        """Yields True if this process now holds ``cid``'s fold, False if another one does (or Redis is
        unreachable: the fold waits for the next run)."""
        b = self.backend
        key = b.keys.lock(f"summary:{cid}")
        value = uuid.uuid4().hex
        try:
            held = await b.run(
                lambda: b.client.set(key, value, nx=True, px=int(self.ttl * 1000)),
                what=f"taking the summary lock of {cid}",
                retry_for=0,
            )
        except DispatchError as exc:
            log.warning("summary of %s not folded now: %s", cid, exc)
            held = False
        if not held:
            yield False
            return
        try:
            yield True
        finally:
            try:
                await b.call(
                    b.release_lock, [key], [value, 0], what=f"releasing the summary lock of {cid}", retry_for=0
                )
            except DispatchError as exc:
                log.warning("summary lock of %s not released (%s); it expires in %.0fs", cid, exc, self.ttl)
