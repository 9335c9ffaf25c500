"""The worker process: an arq worker whose only job is the drain job, started as soon as work arrives,
plus the lease renewer, the sweeper that reschedules contexts whose lease expired, and a graceful stop.

arq polls its queue (every 0.5 s by default) and claims each job with a WATCH/MULTI transaction. Here an
idle worker blocks on the queue itself (``BZMPOP``: it returns the moment a drain job is scheduled and
pops it for this worker alone), so a message starts running within milliseconds while an idle worker
makes one Redis call per ``poll_delay``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
import uuid
from typing import TYPE_CHECKING, Any

import arq.worker
import redis.exceptions
from arq.connections import ArqRedis

from ..errors import DispatchError
from .backend import DRAIN_FUNCTION, RETRY_PAUSE_MAX, RETRYABLE, RedisBackend, close_client, describe
from .backlog import shared_backlog
from .dispatcher import RedisDispatcher
from .drain import Drainer, DrainStats
from .reply_ledger import ReplayModel
from .stops import FleetStops

if TYPE_CHECKING:
    from ..dispatch import Runner

__all__ = ("QueueWorker",)

log = logging.getLogger("core.fleet.arq_worker")

_POLL_ERRORS: tuple[type[BaseException], ...] = (*RETRYABLE, redis.exceptions.RedisError)

BACKLOG_EVERY = 5.0
"""Seconds between two measures of the backlog (``core.fleet.backlog``), at most: a short lease measures more often."""

DRAIN_JOB_TIMEOUT = 3600
"""Seconds arq lets one drain job run (it hands off after ``handoff_batches`` batches long before)."""


class _WakeWorker(arq.worker.Worker):
    """arq's worker, blocking on its queue (or waiting for a freed slot) instead of polling it."""

    def __init__(self, *, backend: RedisBackend, drainer: Drainer, pool: ArqRedis) -> None:
        cfg = backend.config
        super().__init__(
            functions=[arq.worker.func(drainer.drain, name=DRAIN_FUNCTION, max_tries=5)],
            queue_name=backend.keys.queue,
            redis_pool=pool,
            handle_signals=False,
            max_jobs=cfg.concurrency,
            job_timeout=DRAIN_JOB_TIMEOUT,
            keep_result=0,
            poll_delay=0,
            retry_jobs=True,
            log_results=False,
            job_serializer=lambda data: json.dumps(data, default=repr).encode(),
            job_deserializer=json.loads,
        )
        self.backend = backend
        self.drainer = drainer
        self.idle_wait = cfg.poll_delay
        """Seconds one blocking pop waits before the loop goes round (health check, stop flag)."""
        self.wakeups = 0
        """Blocking pops that returned work."""
        self._slot_freed = asyncio.Event()
        self._failing_since: float | None = None
        self.closing = False
        """Set to end ``serve`` (checked every iteration, so a cancellation swallowed inside a library
        cannot keep the loop alive)."""

    async def serve(self) -> None:
        """arq's polling loop, minus its fixed sleep: wait for work, start jobs, repeat until closing."""
        self.ctx["redis"] = self.pool
        while not self.closing:
            await self._poll_iteration()

    async def start_jobs(self, job_ids: list[Any]) -> None:
        """Start the popped jobs (``_poll_iteration`` never pops more than there are free slots)."""
        for raw in job_ids:
            job_id = raw.decode() if isinstance(raw, bytes) else str(raw)
            await self.sem.acquire()
            self.job_counter += 1
            task = self.loop.create_task(self.run_drain(job_id), name=f"job:{job_id}")
            task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
            self.tasks[job_id] = task

    async def run_drain(self, job_id: str) -> None:
        """Run one drain job. arq's ``run_job`` is not used: it reads the job's payload, counts its tries and
        marks it in progress in a transaction (five commands, one round trip a job), and cleans up after it. A
        drain job is its id, which names its context; the claim script decides whether it runs; a job that
        fails, or whose worker dies, leaves its context to the sweeper, which schedules a new one. Measured with
        ``bench/capacity.py`` (500 chats x 1 message): 1.0 round trip and 5 commands a message less."""
        cid = self.backend.keys.cid_of_job(job_id)
        try:
            async with asyncio.timeout(DRAIN_JOB_TIMEOUT):
                await self.drainer.drain({"job_id": job_id}, cid)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("drain job %s for %s failed; the sweeper schedules its context again", job_id, cid)

    def _release_sem_dec_counter_on_complete(self) -> None:
        super()._release_sem_dec_counter_on_complete()
        self._slot_freed.set()

    async def pop(self, free: int) -> list[str]:
        """Up to ``free`` drain jobs for this worker: at once if the queue holds some, else as soon as
        one is scheduled (or nothing after ``idle_wait`` seconds). A popped job is this worker's alone;
        jobs popped while the worker started stopping go back to the queue."""
        client = self.backend.client
        async with asyncio.timeout(self.idle_wait + self.backend.config.op_timeout):
            popped = await client.bzmpop(self.idle_wait, 1, [self.queue_name], min=True, count=free)
        if not popped:
            return []
        pairs: list[tuple[str, float]] = [(job_id, float(score)) for job_id, score in popped[1]]
        if not self.allow_pick_jobs:
            await self.backend.run(
                lambda: client.zadd(self.queue_name, dict(pairs)), what="returning jobs to the queue"
            )
            return []
        self.wakeups += 1
        return [job_id for job_id, _ in pairs]

    async def _poll_iteration(self) -> None:
        """Pop as many jobs as there are free slots (waiting for them if there are none), start them,
        tidy up. At capacity, wait for a slot to free instead.

        arq reads the queue with ZRANGEBYSCORE and marks each job in progress with a WATCH/MULTI
        transaction, so two workers often start the same job and one of them backs off. A pop hands each
        job to exactly one worker in one call; the drain job's claim script is what makes a context run in
        one place, and the sweeper reschedules a job whose worker died between pop and claim."""
        try:
            if self._failing_since is not None:  # first a PING: a blocking pop would say Redis is back
                await self._probe()  # only when it returns, up to ``idle_wait`` later
            free = self.max_jobs - self.job_counter
            if not self.allow_pick_jobs:
                await asyncio.sleep(min(self.idle_wait, 0.2))
            elif free <= 0:
                self._slot_freed.clear()
                if self.job_counter >= self.max_jobs:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.idle_wait):
                            await self._slot_freed.wait()
            else:
                await self.start_jobs(await self.pop(free))
            for job_id, task in list(self.tasks.items()):
                if task.done():
                    del self.tasks[job_id]
                    task.result()
            await self.heart_beat()
        except _POLL_ERRORS as exc:
            now = time.monotonic()
            self.backend.failed(exc)
            if self._failing_since is None:
                self._failing_since = now
                log.warning("redis unavailable (%s); retrying until it is back", describe(exc))
            await asyncio.sleep(min(RETRY_PAUSE_MAX, 0.05 + (now - self._failing_since) / 4))

    async def _probe(self) -> None:
        """PING Redis after a failure; when it answers, the outage is over for this loop."""
        cfg = self.backend.config
        async with asyncio.timeout(cfg.op_timeout + cfg.connect_timeout):
            await self.backend.client.ping()
        if self._failing_since is not None:
            log.warning("redis is back after %.1fs", time.monotonic() - self._failing_since)
            self._failing_since = None
        self.backend.answered()


class QueueWorker:
    """Runs ``agent``'s contexts from the Redis queue until stopped (SIGTERM/SIGINT or ``stop()``).

    On stop it takes no new work, lets running runs finish for up to ``stop_timeout`` seconds, then
    cancels the rest and hands their contexts back to the queue (their batches are redelivered).
    """

    def __init__(self, agent: Runner, backend: RedisBackend | None = None) -> None:
        if backend is None:
            if not isinstance(agent.dispatcher, RedisDispatcher):
                raise DispatchError(
                    "QueueWorker needs a RedisBackend, or an agent built with a RedisDispatcher "
                    "(REDIS_URL) as its dispatcher"
                )
            backend = agent.dispatcher.backend
        self.agent = agent
        """The agent whose contexts are run."""
        self.backend = backend
        """The connection."""
        self.drainer = Drainer(agent, backend)
        """Runs the drain jobs."""
        self.stops = FleetStops(backend)
        """The Stops pressed on the gateways, for the runs of this worker (``Drainer.stop``)."""
        self.rescheduled = 0
        """Contexts this worker's sweeper rescheduled after their lease expired."""
        self._stop = asyncio.Event()
        self._closing = False
        self._arq: _WakeWorker | None = None

    @property
    def stats(self) -> DrainStats:
        """Counters of the drain jobs run here."""
        return self.drainer.stats

    def stop(self) -> None:
        """Ask the worker to stop (what SIGTERM does)."""
        self._stop.set()

    async def run(self, *, handle_signals: bool = True) -> None:
        """Start the agent, work until stopped, stop gracefully."""
        cfg = self.backend.config
        if not isinstance(self.agent.model, ReplayModel):
            self.agent.model = ReplayModel(self.agent.model)
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, self._stop.set)
        pool: ArqRedis = self.backend.arq_pool()  # REDIS_URL, or the primary the sentinels name
        try:
            await self.backend.run(self.backend.client.ping, what="connecting", retry_for=cfg.retry_seconds)
            async with self.agent:
                worker = self._arq = _WakeWorker(backend=self.backend, drainer=self.drainer, pool=pool)
                async with asyncio.TaskGroup() as tg:
                    listening = tg.create_task(
                        self.stops.listen(self.drainer.stop, self.drainer.arrived),
                        name="stops",
                    )
                    with contextlib.suppress(TimeoutError):  # (not yet: it keeps trying, and says so)
                        async with asyncio.timeout(cfg.retry_seconds):
                            await self.stops.subscribed.wait()
                    log.info(
                        "worker ready: %d contexts at a time, lease %.1fs, redis %s",
                        cfg.concurrency,
                        cfg.lease_seconds,
                        cfg.shown_url,
                    )
                    main = tg.create_task(worker.serve(), name="arq-loop")
                    sweeper = tg.create_task(self._sweep(), name="sweeper")
                    renewer = tg.create_task(self.drainer.renew_forever(), name="renewer")
                    measurer = tg.create_task(self._measure(), name="backlog")
                    stopped = tg.create_task(self._stop.wait(), name="stop-signal")
                    await asyncio.wait({main, stopped}, return_when=asyncio.FIRST_COMPLETED)
                    if main.done():
                        main.result()  # the loop failed: raise its error
                    await self._shutdown(worker)
                    worker.closing = self._closing = True
                    for task in (main, sweeper, renewer, measurer, stopped, listening):
                        task.cancel()
                with contextlib.suppress(*_POLL_ERRORS):  # arq's close() would use a deprecated call
                    await pool.delete(worker.health_check_key)
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            with contextlib.suppress(Exception):
                await close_client(pool)

    async def _shutdown(self, worker: _WakeWorker) -> None:
        cfg = self.backend.config
        self.drainer.stopping = True
        worker.allow_pick_jobs = False
        running = [t for t in worker.tasks.values() if not t.done()]
        log.info("stopping: %d drain jobs running, waiting up to %.1fs", len(running), cfg.stop_timeout)
        if running:
            _, pending = await asyncio.wait(running, timeout=cfg.stop_timeout)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("stopping: handing %d unfinished contexts back to the queue", len(pending))
                await asyncio.wait(pending)

    async def _measure(self) -> None:
        """Report the fleet's backlog to the agent's observers (``queue_depth``: ``bots_queue_depth{queue}``) every
        ``BACKLOG_EVERY`` seconds (less with a short lease) until the worker stops."""
        every = min(BACKLOG_EVERY, max(0.2, self.backend.config.renew_interval))
        owner = uuid.uuid4().hex
        while not self._closing:
            try:
                backlog = await shared_backlog(self.backend, owner=owner, every=every)
            except DispatchError as exc:
                log.debug("backlog not measured: %s", exc)
            else:
                for queue, depth in backlog.depths().items():
                    self.agent.observe("queue_depth", queue, depth)
            await asyncio.sleep(every)

    # -- the sweeper -----------------------------------------------------------------------------------

    async def _sweep(self) -> None:
        interval = self.backend.config.sweep_interval
        while not self._closing:
            await asyncio.sleep(interval)
            try:
                await self.sweep_once()
            except DispatchError as exc:
                log.debug("sweep skipped: %s", exc)

    async def sweep_once(self, *, limit: int = 100) -> int:
        """Look at contexts whose lease (or scheduled job) is overdue by the Redis server's clock (this machine's
        may be off); reschedule the ones whose holder is gone. Returns how many were rescheduled."""
        b, cfg = self.backend, self.backend.config
        keys = b.keys
        due: list[str] = await b.call(b.overdue, [keys.active], [limit], what="sweeping", retry_for=0)
        count = 0
        for cid in due:
            ck = keys.context(cid)
            result = await b.call(
                b.rescue,
                [keys.active, ck.lease, ck.inbox, ck.batch, ck.meta, keys.queue],
                [cid, keys.job_id(cid, uuid.uuid4().hex), cfg.claim_check_ms],
                what=f"rescuing {cid}",
                retry_for=0,
            )
            if result == "rescheduled":
                count += 1
                log.warning("%s: its worker stopped renewing the lease; rescheduled", cid)
        self.rescheduled += count
        return count

    def describe(self) -> dict[str, Any]:
        """Counters for logs and benchmarks."""
        out: dict[str, Any] = dict(vars(self.stats))
        out["rescheduled"] = self.rescheduled
        out["wakeups"] = self._arq.wakeups if self._arq is not None else 0
        return out
