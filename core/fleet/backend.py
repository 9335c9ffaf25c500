"""The connection to Redis: one pool, the registered scripts, and the translation of redis-py errors
into ``DispatchError`` (naming ``REDIS_URL``), with retries while Redis restarts or fails over.

With ``REDIS_SENTINELS`` the pool asks the sentinels where the primary is, at each new connection: after a
failover the connections to the old primary fail (refused, or ``READONLY`` once it is a replica), the call is
retried, and the next connection goes to the promoted replica. A write an acknowledgement relies on can be
confirmed on ``REDIS_MIN_REPLICAS`` replicas (``call(..., confirm=True)``: the script and a ``WAIT`` in one
round trip); when fewer confirm it within ``REDIS_REPLICA_TIMEOUT``, the call fails as if Redis were down.
The seconds Redis has been failing (unreachable, no primary, replicas behind) are kept for readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio
import redis.exceptions

from ..errors import DispatchError
from . import scripts
from .keys import Keys
from .options import QueueConfig

__all__ = ("RETRYABLE", "RETRY_PAUSE_MAX", "RedisBackend", "ReplicasBehind", "close_client", "describe", "make_client")

log = logging.getLogger("core.fleet")

RETRYABLE: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    TimeoutError,
    OSError,
)
"""Errors that go away when Redis is back (restart, failover, network blip)."""

_ASK_ERRORS: tuple[type[BaseException], ...] = (*RETRYABLE, redis.exceptions.RedisError)

RETRY_PAUSE_MAX = 0.5
"""The longest pause between two attempts while Redis fails (they start at 50 ms and double): a process notices
Redis is back within half a second of it (a pause of up to a second, and the worker's blocking pop after it, made
that 4.4 s after a 3 s outage)."""

SENTINEL_CHECK = 1.0
"""Seconds between two questions to the sentinels about which server is the primary (``_follow_primary``)."""

DRAIN_FUNCTION = "drain"
"""The name of the arq job function that drains one context."""


class ReplicasBehind(Exception):
    """Fewer replicas than ``REDIS_MIN_REPLICAS`` (or than the primary has in step) confirmed a write within
    ``REDIS_REPLICA_TIMEOUT``."""


REPLICA_LAG_MAX = 2
"""Seconds since a replica's last acknowledgement to its primary (``lag`` in ``INFO replication``; replicas
acknowledge every second) beyond which it no longer counts as in step: a write then need not wait for it."""


def replicas_in_step(info: Any) -> int:
    """Replicas an ``INFO replication`` answer lists online and in step (``lag`` at most ``REPLICA_LAG_MAX``)."""
    if not isinstance(info, dict):
        return 0
    found = 0
    for name, value in info.items():
        if str(name).startswith("slave") and isinstance(value, dict):
            found += value.get("state") == "online" and int(value.get("lag", REPLICA_LAG_MAX + 1)) <= REPLICA_LAG_MAX
    return found


def describe(exc: BaseException) -> str:
    """A short text for a redis-py error (never contains the password)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def make_client(config: QueueConfig, *, redis_class: Any = None, decode_responses: bool = True, **options: Any) -> Any:
    """A redis-py asyncio client of ``redis_class`` (``redis.asyncio.Redis`` by default; arq's ``ArqRedis``
    for its worker) for ``config``: from ``REDIS_URL``, or, with ``REDIS_SENTINELS``, on a pool that asks
    the sentinels for the primary of ``REDIS_SENTINEL_MASTER`` (the URL then gives the scheme, the database
    and the credentials). ``options`` go to every connection (``client_name``, timeouts)."""
    cls = redis_class or redis.asyncio.Redis
    options.setdefault("socket_connect_timeout", config.connect_timeout)
    if not config.sentinels:
        return cls.from_url(config.url, password=config.password, decode_responses=decode_responses, **options)
    from redis.asyncio.connection import SSLConnection, parse_url
    from redis.asyncio.sentinel import Sentinel

    given = parse_url(config.url)
    kwargs: dict[str, Any] = {k: v for k, v in given.items() if k not in ("host", "port", "path", "connection_class")}
    if given.get("connection_class") is SSLConnection:
        kwargs["ssl"] = True
    if config.password is not None:
        kwargs["password"] = config.password
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": config.connect_timeout,
        "socket_timeout": config.connect_timeout,
    }
    if config.sentinel_password is not None:
        sentinel_kwargs["password"] = config.sentinel_password
    factory: Any = Sentinel  # (untyped in redis-py)
    sentinel = factory(list(config.sentinels), sentinel_kwargs=sentinel_kwargs)
    return sentinel.master_for(
        config.sentinel_master, redis_class=cls, decode_responses=decode_responses, **kwargs, **options
    )


async def close_client(client: Any) -> None:
    """Close a client of ``make_client``: its pool, and its connections to the sentinels."""
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    await client.aclose()
    for sentinel in getattr(manager, "sentinels", ()):
        await sentinel.aclose()


class RedisBackend:
    """One Redis client for the queue, the memory store and the reply ledger of a process.

    Creating it does no I/O; the pool connects on first use and reconnects by itself.
    """

    def __init__(self, config: QueueConfig, *, client_name: str = "bots") -> None:
        self.config = config
        """The queue settings."""
        self.keys = Keys(config.prefix)
        """Key names."""
        self.client_name = client_name
        """What this process calls itself on its connections (``CLIENT LIST``)."""
        self.client: Any = make_client(config, health_check_interval=30, client_name=client_name)
        """The redis-py client (``decode_responses=True``). No socket timeout: every call has its own
        deadline (``run``), which costs less than redis-py's timer per read."""
        register = self.client.register_script
        self.ingest = register(scripts.INGEST)
        self.renew = register(scripts.RENEW)
        self.step = register(scripts.STEP)
        self.overdue = register(scripts.OVERDUE)
        self.rescue = register(scripts.RESCUE)
        self.confirm_ack = register(scripts.CONFIRM_ACK)
        self.begin_reply = register(scripts.BEGIN_REPLY)
        self.store_model = register(scripts.STORE_MODEL)
        self.mark_posted = register(scripts.MARK_POSTED)
        self.release_lock = register(scripts.RELEASE_LOCK)
        self.shard_take = register(scripts.SHARD_TAKE)
        self.shard_renew = register(scripts.SHARD_RENEW)
        self.stop_answer = register(scripts.STOP)
        self.join = register(scripts.JOIN)
        self._closed = False
        self._in_step = 0
        """Replicas in step at the last confirmed write (``replicas_in_step``): how many the next one waits for."""
        self.failing_since: float | None = None
        """``time.monotonic()`` of the first failure of the current outage (None while Redis answers)."""
        self.failure = ""
        """What the last failure was (no secrets)."""
        self.outages = 0
        """Outages ended so far (Redis failed, then answered again)."""
        self.last_outage = 0.0
        """Seconds the last ended outage lasted."""
        self.degraded_total = 0.0
        """Seconds of every ended outage together."""
        self._behind_only = False
        self._pools: list[Any] = [self.client]
        self._watch: asyncio.Task[None] | None = None

    # -- health ----------------------------------------------------------------------------------------

    def failed(self, exc: BaseException) -> None:
        """A call failed for a reason that goes away (Redis unreachable, no primary, replicas behind)."""
        if self.failing_since is None:
            self.failing_since = time.monotonic()
            log.warning("redis at %s unavailable: %s", self.config.shown_url, describe(exc))
        self.failure = describe(exc)
        self._behind_only = isinstance(exc, ReplicasBehind)

    def answered(self, *, confirmed: bool = False) -> None:
        """A call succeeded: an outage in progress is over (one where only the replicas were behind ends with
        a write they ``confirmed``)."""
        if self.failing_since is None or (self._behind_only and not confirmed):
            return
        lasted = time.monotonic() - self.failing_since
        self.failing_since = None
        self.outages += 1
        self.last_outage = lasted
        self.degraded_total += lasted
        log.warning("redis answers again after %.1fs (primary %s)", lasted, self.primary or self.config.shown_url)

    @property
    def degraded_for(self) -> float:
        """Seconds the current outage has lasted (0 while Redis answers)."""
        return 0.0 if self.failing_since is None else time.monotonic() - self.failing_since

    @property
    def primary(self) -> str:
        """``host:port`` of the server the pool connects to (with sentinels: the primary they named last;
        empty before the first connection)."""
        pool = self.client.connection_pool
        address = getattr(pool, "master_address", None)
        if address is not None:
            return f"{address[0]}:{address[1]}"
        if self.config.sentinels:
            return ""
        kwargs = pool.connection_kwargs
        return kwargs.get("path") or f"{kwargs.get('host', '')}:{kwargs.get('port', '')}"

    def state(self) -> dict[str, Any]:
        """What readiness shows about Redis (``info.redis``)."""
        return {
            "primary": self.primary,
            "degraded_seconds": round(self.degraded_for, 3),
            "failure": self.failure if self.failing_since is not None else "",
            "outages": self.outages,
            "last_outage_seconds": round(self.last_outage, 3),
            "min_replicas": self.config.min_replicas,
        }

    def arq_pool(self) -> Any:
        """arq's ``ArqRedis`` on the same Redis (or the same sentinels) for the worker's arq parts."""
        from arq.connections import ArqRedis

        pool = make_client(
            self.config,
            redis_class=ArqRedis,
            decode_responses=False,
            socket_timeout=self.config.op_timeout,
            health_check_interval=30,
            client_name=self.client_name,
        )
        self._pools.append(pool)
        return pool

    def _watch_primary(self) -> None:
        """With sentinels, start (once, owned by this backend) the task that follows the primary they name."""
        if self.config.sentinels and self._watch is None and not self._closed:
            self._watch = asyncio.get_running_loop().create_task(self._follow_primary(), name="redis:primary")

    async def _follow_primary(self) -> None:
        """Every ``SENTINEL_CHECK`` seconds, ask the sentinels which server is the primary; when it is another
        than the one this process's connections go to, close them all, in use or not. A connection is asked
        for the primary only when it opens: without this, a primary the sentinels demoted while it still ran
        (cut off from them, too slow to answer) would take this process's writes until it learns it is a
        replica, and they would be lost with it."""
        manager = self.client.connection_pool.sentinel_manager
        while not self._closed:
            await asyncio.sleep(SENTINEL_CHECK)
            try:
                async with asyncio.timeout(self.config.connect_timeout * 2):
                    named = await manager.discover_master(self.config.sentinel_master)
            except _ASK_ERRORS as exc:
                log.debug("could not ask the sentinels for the primary: %s", describe(exc))
                continue
            for client in self._pools:
                pool = client.connection_pool
                if pool.master_address is None or tuple(pool.master_address) == tuple(named):
                    continue
                log.warning(
                    "the sentinels name %s:%s the primary (connections went to %s:%s): reconnecting",
                    named[0],
                    named[1],
                    *pool.master_address,
                )
                pool.master_address = named
                with contextlib.suppress(Exception):
                    await pool.disconnect(inuse_connections=True)

    # -- calls -----------------------------------------------------------------------------------------

    def error(self, what: str, exc: BaseException) -> DispatchError:
        """The ``DispatchError`` for a failed call: what failed, and what to check."""
        if isinstance(exc, ReplicasBehind):
            return DispatchError(
                f"Redis at {self.config.shown_url}: {exc} while {what}; the acknowledgement waits. Check the "
                "replicas (INFO replication), or lower REDIS_MIN_REPLICAS / raise REDIS_REPLICA_TIMEOUT"
            )
        return DispatchError(
            f"Redis at {self.config.shown_url} failed while {what} ({describe(exc)}); check that Redis is "
            f"running and {self.config.settings_hint} point to it"
        )

    @property
    def confirms(self) -> bool:
        """Whether writes an acknowledgement relies on wait for replicas (``REDIS_MIN_REPLICAS`` > 0)."""
        return self.config.min_replicas > 0

    async def call(
        self,
        script: Any,
        keys: Sequence[str],
        args: Sequence[Any],
        *,
        what: str,
        retry_for: float | None = None,
        confirm: bool = False,
    ) -> Any:
        """Run a registered script with a deadline per attempt; retry connection errors for
        ``retry_for`` seconds (default ``retry_seconds``), then raise ``DispatchError``.

        ``confirm``: the write must reach ``REDIS_MIN_REPLICAS`` replicas (a ``WAIT`` right after the script,
        on its connection) before this returns; when fewer confirm it in time, the script is run again like
        after a connection error (the scripts that confirm write something on every run, so the ``WAIT``
        covers the earlier write too)."""
        if not (confirm and self.confirms):
            return await self.run(lambda: script(keys=keys, args=args), what=what, retry_for=retry_for)

        async def confirmed() -> Any:
            result, acked, needed = await self._with_wait(script, keys, args)
            if acked < needed:
                raise self._behind(acked, needed)
            return result

        return await self.run(
            confirmed, what=what, retry_for=retry_for, extra=self.config.replica_timeout, confirmed=True
        )

    async def call_once(
        self, script: Any, keys: Sequence[str], args: Sequence[Any], *, what: str, retry_for: float | None = None
    ) -> tuple[Any, bool]:
        """``call`` for a script whose write must reach the replicas but that must not run again once it ran
        (a batch's acknowledgement): ``(result, confirmed)``, the ``WAIT`` in the same round trip. When fewer
        replicas confirmed in time, the caller checks that its write is still there and confirms it then
        (``call`` with a script that writes, ``confirm=True``)."""
        if not self.confirms:
            return await self.run(lambda: script(keys=keys, args=args), what=what, retry_for=retry_for), True
        result, acked, needed = await self.run(
            lambda: self._with_wait(script, keys, args),
            what=what,
            retry_for=retry_for,
            extra=self.config.replica_timeout,
        )
        if acked < needed:
            self.failed(self._behind(acked, needed))
            return result, False
        self.answered(confirmed=True)
        return result, True

    async def _with_wait(self, script: Any, keys: Sequence[str], args: Sequence[Any]) -> tuple[Any, int, int]:
        """The script, ``WAIT`` and ``INFO replication`` on the same connection (one round trip): its result, the
        replicas that confirmed the connection's writes so far, and how many had to: ``REDIS_MIN_REPLICAS``, or
        every replica the primary has in step when it has more. With two replicas and ``REDIS_MIN_REPLICAS=1``,
        a ``WAIT`` for one does not say which one has the write, and the sentinels may promote the other (issue
        40: 2 of 500 messages lost in 1 of 9 runs); a write both have survives either promotion. A replica cut off
        stops counting ``REPLICA_LAG_MAX`` seconds after its last acknowledgement (the writes of those seconds
        are tried again meanwhile)."""
        async with self.client.pipeline(transaction=False) as pipe:  # (given back whatever fails: drain.renew_once)
            await script(keys=keys, args=args, client=pipe)
            waited = max(self.config.min_replicas, self._in_step)
            pipe.execute_command("WAIT", waited, max(1, int(self.config.replica_timeout * 1000)))
            pipe.execute_command("INFO", "replication")
            result, acked, info = await pipe.execute()
        self._in_step = replicas_in_step(info)
        return result, int(acked), max(self.config.min_replicas, self._in_step)

    def _behind(self, acked: int, needed: int) -> ReplicasBehind:
        which = (
            f"REDIS_MIN_REPLICAS={needed} replicas"
            if needed == self.config.min_replicas
            else f"the {needed} replicas in step with the primary (REDIS_MIN_REPLICAS={self.config.min_replicas})"
        )
        return ReplicasBehind(
            f"{acked} of {which} confirmed a write within {self.config.replica_timeout:g}s (REDIS_REPLICA_TIMEOUT)"
        )

    async def run(
        self, fn: Any, *, what: str, retry_for: float | None = None, extra: float = 0.0, confirmed: bool = False
    ) -> Any:
        """``await fn()`` with the same deadline, retry and translation as ``call`` (``extra``: seconds
        added to each attempt's deadline; ``confirmed``: a success means the replicas confirmed)."""
        if self._watch is None:
            self._watch_primary()
        budget = self.config.retry_seconds if retry_for is None else retry_for
        give_up = time.monotonic() + budget
        delay = 0.05
        while True:
            try:
                async with asyncio.timeout(self.config.op_timeout + self.config.connect_timeout + extra):
                    result = await fn()
            except ReplicasBehind as exc:
                self.failed(exc)
                if self._closed or time.monotonic() + delay > give_up:
                    raise self.error(what, exc) from exc
                log.debug("replicas behind while %s (%s); retrying in %.2fs", what, exc, delay)
            except RETRYABLE as exc:
                self.failed(exc)
                if self._closed or time.monotonic() + delay > give_up:
                    raise self.error(what, exc) from exc
                log.debug("redis unavailable while %s (%s); retrying in %.2fs", what, describe(exc), delay)
            except redis.exceptions.ReadOnlyError as exc:  # a primary demoted behind the same address
                self.failed(exc)
                with contextlib.suppress(Exception):
                    await self.client.connection_pool.disconnect()
                if self._closed or time.monotonic() + delay > give_up:
                    raise self.error(what, exc) from exc
            except redis.exceptions.RedisError as exc:
                raise self.error(what, exc) from exc
            else:
                self.answered(confirmed=confirmed)
                return result
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_PAUSE_MAX)

    # -- lifecycle -------------------------------------------------------------------------------------

    async def ping(self) -> None:
        """Check Redis answers, trying again for ``REDIS_RETRY_SECONDS`` like every call (a process starting
        while the primary fails over or restarts waits for it); raises ``DispatchError`` naming ``REDIS_URL``
        (or the sentinels) if it does not answer by then."""
        await self.run(self.client.ping, what="connecting")

    async def replicas(self) -> int:
        """Replicas connected to the primary now (``INFO replication``); raises ``DispatchError``."""
        info = await self.run(lambda: self.client.info("replication"), what="reading INFO replication", retry_for=0)
        return int(info.get("connected_slaves", 0))

    async def close(self) -> None:
        """Close the pool (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        await close_client(self.client)
