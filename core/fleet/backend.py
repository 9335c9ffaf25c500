"""The connection to Redis: one pool, the registered scripts, and the translation of redis-py errors
into ``DispatchError`` (naming ``REDIS_URL``), with retries while Redis restarts."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

import redis.asyncio
import redis.exceptions

from ..errors import DispatchError
from . import scripts
from .keys import Keys
from .options import QueueConfig

__all__ = ("RETRYABLE", "RedisBackend", "describe")

log = logging.getLogger("core.fleet")

RETRYABLE: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    TimeoutError,
    OSError,
)
"""Errors that go away when Redis is back (restart, failover, network blip)."""

DRAIN_FUNCTION = "drain"
"""The name of the arq job function that drains one context."""


def describe(exc: BaseException) -> str:
    """A short text for a redis-py error (never contains the password)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class RedisBackend:
    """One Redis client for the queue, the memory store and the reply ledger of a process.

    Creating it does no I/O; the pool connects on first use and reconnects by itself.
    """

    def __init__(self, config: QueueConfig, *, client_name: str = "bots") -> None:
        self.config = config
        """The queue settings."""
        self.keys = Keys(config.prefix)
        """Key names."""
        self.client: Any = redis.asyncio.Redis.from_url(
            config.url,
            password=config.password,
            decode_responses=True,
            socket_connect_timeout=config.connect_timeout,
            health_check_interval=30,
            client_name=client_name,
        )
        """The redis-py client (``decode_responses=True``). No socket timeout: every call has its own
        deadline (``run``), which costs less than redis-py's timer per read."""
        register = self.client.register_script
        self.ingest = register(scripts.INGEST)
        self.renew = register(scripts.RENEW)
        self.step = register(scripts.STEP)
        self.rescue = register(scripts.RESCUE)
        self.begin_reply = register(scripts.BEGIN_REPLY)
        self.store_model = register(scripts.STORE_MODEL)
        self.mark_posted = register(scripts.MARK_POSTED)
        self.release_lock = register(scripts.RELEASE_LOCK)
        self.shard_take = register(scripts.SHARD_TAKE)
        self.shard_renew = register(scripts.SHARD_RENEW)
        self._closed = False

    # -- calls -----------------------------------------------------------------------------------------

    def error(self, what: str, exc: BaseException) -> DispatchError:
        """The ``DispatchError`` for a failed call: what failed, and what to check."""
        return DispatchError(
            f"Redis at {self.config.shown_url} failed while {what} ({describe(exc)}); check that Redis is "
            "running and REDIS_URL (and REDIS_PASSWORD) point to it"
        )

    async def call(
        self,
        script: Any,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        what: str,
        retry_for: float | None = None,
    ) -> Any:
        """Run a registered script with a deadline per attempt; retry connection errors for
        ``retry_for`` seconds (default ``retry_seconds``), then raise ``DispatchError``."""
        return await self.run(lambda: script(keys=keys, args=args), what=what, retry_for=retry_for)

    async def run(self, fn: Any, *, what: str, retry_for: float | None = None) -> Any:
        """``await fn()`` with the same deadline, retry and translation as ``call``."""
        budget = self.config.retry_seconds if retry_for is None else retry_for
        give_up = time.monotonic() + budget
        delay = 0.05
        while True:
            try:
                async with asyncio.timeout(self.config.op_timeout + self.config.connect_timeout):
                    return await fn()
            except RETRYABLE as exc:
                if self._closed or time.monotonic() + delay > give_up:
                    raise self.error(what, exc) from exc
                log.debug("redis unavailable while %s (%s); retrying in %.2fs", what, describe(exc), delay)
            except redis.exceptions.RedisError as exc:
                raise self.error(what, exc) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    # -- drain jobs ------------------------------------------------------------------------------------

    def new_job(self, cid: str) -> tuple[str, str, str]:
        """``(job id, arq job key, arq job payload)`` for a fresh drain job of ``cid``."""
        job_id = self.keys.job_id(cid, uuid.uuid4().hex)
        payload = json.dumps(
            {"t": None, "f": DRAIN_FUNCTION, "a": [cid], "k": {}, "et": int(time.time() * 1000)},
            separators=(",", ":"),
        )
        return job_id, self.keys.arq_job(job_id), payload

    @property
    def job_ttl_ms(self) -> int:
        """How long a scheduled job's arq key lives (a day, like arq's default)."""
        return 86_400_000

    # -- lifecycle -------------------------------------------------------------------------------------

    async def ping(self) -> None:
        """Check Redis answers; raises ``DispatchError`` naming ``REDIS_URL`` if not."""
        await self.run(self.client.ping, what="connecting", retry_for=0)

    async def close(self) -> None:
        """Close the pool (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self.client.aclose()
