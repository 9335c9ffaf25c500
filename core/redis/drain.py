"""The drain job: what a worker does for one context it was given.

claim (take the lease only if this job is the scheduled one) -> take a batch (an unacknowledged
batch first: crash redelivery) -> ``agent.run`` -> fenced ack together with the memory writes and
the next take -> ... -> release when the inbox is empty, or hand off after ``handoff_batches`` so a
busy channel cannot hold a worker slot. A renewal task keeps the lease; losing it cancels the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import DispatchError
from ..logs import InputRef
from .backend import RedisBackend
from .ledger import REPLY_LEDGER, RedisReplyLedger
from .scope import Lease, RunScope

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ("DrainStats", "Drainer")

log = logging.getLogger("core.redis.drain")


@dataclass(kw_only=True)
class DrainStats:
    """Counters of one worker process."""

    jobs: int = 0
    """Drain jobs started."""
    batches: int = 0
    """Batches acknowledged."""
    inputs: int = 0
    """Inputs in acknowledged batches."""
    redelivered: int = 0
    """Batches run again after an earlier attempt did not finish."""
    lost: int = 0
    """Leases lost (this worker was too slow, paused or cut off; another worker took over)."""
    failed: int = 0
    """Runs that raised (their batch is delivered again, up to ``max_attempts``)."""
    dead: int = 0
    """Batches moved to the dead-letter list."""


class Drainer:
    """Runs drain jobs for ``agent`` (one per context at a time, cluster-wide)."""

    def __init__(self, agent: Agent, backend: RedisBackend) -> None:
        self.agent = agent
        """The agent whose contexts are run."""
        self.backend = backend
        """The connection."""
        self.config = backend.config
        self.stopping = False
        """Set when the worker stops: running jobs hand their context back after the current batch."""
        self.stats = DrainStats()
        """Counters."""
        self._local: dict[str, tuple[asyncio.Task[Any], Lease]] = {}

    # -- the job ---------------------------------------------------------------------------------------

    async def drain(self, ctx: dict[str, Any], cid: str) -> str:
        """The arq job function. Returns what happened: ``released``, ``handed_off``, ``lost``,
        ``stale`` (another job is responsible now) or ``held``."""
        job_id = str(ctx["job_id"])
        self.stats.jobs += 1
        lease = await self._claim(cid, job_id)
        if lease is None:
            return "stale"
        me = asyncio.current_task()
        assert me is not None
        previous = self._local.get(cid)
        self._local[cid] = (me, lease)
        try:
            if previous is not None and not previous[0].done():
                previous[1].lost = True  # a job of ours that lost the lease is still winding down
                self.agent.cancel_run(cid)
                await asyncio.wait({previous[0]})
            finished = asyncio.Event()
            async with asyncio.TaskGroup() as tg:
                renewer = tg.create_task(self._renew(lease, finished), name=f"renew:{cid}")
                try:
                    return await self._batches(lease)
                finally:
                    finished.set()
                    renewer.cancel()
        finally:
            if self._local.get(cid, (None,))[0] is me:
                del self._local[cid]

    async def _claim(self, cid: str, job_id: str) -> Lease | None:
        b = self.backend
        ck = b.keys.context(cid)
        sent = time.monotonic()
        result = await b.call(
            b.claim,
            [ck.meta, ck.lease, b.keys.queue, b.keys.active],
            [job_id, self.config.lease_ms, cid],
            what=f"claiming {cid}",
        )
        if result[0] != "ok":
            log.debug("drain job %s for %s: %s", job_id, cid, result[0])
            return None
        lease = Lease(cid=cid, token=str(result[1]), job_id=job_id, seconds=self.config.lease_seconds)
        lease.extended(sent)
        return lease

    async def _renew(self, lease: Lease, finished: asyncio.Event) -> None:
        b = self.backend
        ck = b.keys.context(lease.cid)
        while not lease.lost:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.renew_interval):
                    await finished.wait()
            if finished.is_set():
                return
            sent = time.monotonic()
            try:
                ok = await b.call(
                    b.renew,
                    [ck.lease, b.keys.active],
                    [lease.token, self.config.lease_ms, lease.cid],
                    what=f"renewing the lease on {lease.cid}",
                    retry_for=max(0.0, lease.deadline - sent),
                )
            except DispatchError as exc:
                if time.monotonic() < lease.deadline:
                    continue
                log.warning("cannot renew the lease on %s: %s", lease.cid, exc)
                ok = 0
            if ok:
                lease.extended(sent)
            else:
                self._lose(lease)

    def _lose(self, lease: Lease) -> None:
        if lease.lost:
            return
        lease.lost = True
        self.stats.lost += 1
        log.warning("lease on %s lost: cancelling its run; another worker takes the batch over", lease.cid)
        holder = self._local.get(lease.cid)
        if holder is not None and holder[1] is lease:
            self.agent.cancel_run(lease.cid)

    # -- batches ---------------------------------------------------------------------------------------

    async def _batches(self, lease: Lease) -> str:
        acked: RunScope | None = None
        done = 0
        while True:
            mode = "handoff" if acked is not None and (done >= self.config.handoff_batches or self.stopping) else "take"
            try:
                result = await self._step(lease, acked, mode)
            except DispatchError as exc:
                log.warning("giving %s up: %s", lease.cid, exc)
                self._lose(lease)
                return "lost"
            if acked is not None and result[0] != "stale":
                self.stats.batches += 1
            acked = None
            status = str(result[0])
            if status == "stale":
                self._lose(lease)
                return "lost"
            dead = result[4] if status == "batch" else result[1] if len(result) > 1 else ""
            if dead:
                self.stats.dead += 1
                log.error(
                    "batch %s of %s failed %d times: moved to %s",
                    dead,
                    lease.cid,
                    self.config.max_attempts,
                    self.backend.keys.dead,
                )
            if status != "batch":
                return status
            scope = RunScope(
                backend=self.backend,
                keys=self.backend.keys.context(lease.cid),
                lease=lease,
                batch_id=str(result[1]),
                attempt=int(result[2]),
            )
            entries = json.loads(result[3])
            if result[5] == "1":  # an earlier attempt did not finish: replay what it stored
                self.stats.redelivered += 1
                scope.cache = await self._ledger(scope)
            try:
                ok = await self._run(scope, entries)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if lease.lost and task is not None and not task.cancelling():
                    return "lost"  # our own renewer cancelled the run
                self.agent.cancel_run(lease.cid)
                await self._hand_back(lease)
                raise
            if lease.lost:
                return "lost"
            if ok:
                acked = scope
                done += 1
                self.stats.inputs += len(entries)
            else:
                self.stats.failed += 1
                await asyncio.sleep(min(1.0, 0.1 * scope.attempt))

    async def _ledger(self, scope: RunScope) -> dict[str, str]:
        client = self.backend.client
        cache: dict[str, str] = await self.backend.run(
            lambda: client.hgetall(scope.ledger_key), what=f"reading the ledger of {scope.keys.cid}"
        )
        return cache

    async def _run(self, scope: RunScope, entries: list[dict[str, Any]]) -> bool:
        last = entries[-1]
        context = self.agent.contexts.get(last["c"])
        if context is None:
            log.error(
                "context type %r of %s is not defined in this worker: run the same bot version in gateway and workers",
                last["c"],
                scope.keys.cid,
            )
            return False
        try:
            args = context.schema.validate(last["a"])
            inputs = [InputRef.model_validate(entry["i"]) for entry in entries]
        except Exception:
            log.exception("undecodable batch %s of %s", scope.batch_id, scope.keys.cid)
            return False
        options = {
            "batch_id": f"{scope.keys.cid}#{scope.batch_id}",
            "attempt": scope.attempt,
            "enqueued_at": [entry.get("t") for entry in entries],
            REPLY_LEDGER: RedisReplyLedger(scope),
        }
        token = scope.enter()
        try:
            await self.agent.run(context, args, inputs, options=options)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("run of %s (batch %s, attempt %d) failed", scope.keys.cid, scope.batch_id, scope.attempt)
            return False
        finally:
            RunScope.exit(token)
        return True

    async def _step(self, lease: Lease, acked: RunScope | None, mode: str) -> list[Any]:
        b, cfg = self.backend, self.config
        keys = b.keys
        ck = keys.context(lease.cid)
        job_id, job_key, payload = b.new_job(lease.cid)
        writes = list(acked.staged.items()) if acked is not None else []
        args: list[Any] = [
            lease.token,
            lease.cid,
            acked.batch_id if acked is not None else "",
            mode,
            cfg.batch_size,
            cfg.lease_ms,
            cfg.max_attempts,
            job_id,
            payload,
            b.job_ttl_ms,
            cfg.claim_check_ms,
            b.wake_cap,
            len(writes),
        ]
        for _, value in writes:
            args.extend(("s", value) if value is not None else ("d", ""))
        sent = time.monotonic()
        result: list[Any] = await b.call(
            b.step,
            [
                ck.lease,
                ck.batch,
                ck.inbox,
                ck.meta,
                keys.queue,
                keys.active,
                keys.wake,
                keys.dead,
                acked.ledger_key if acked is not None else ck.ledger("-"),
                job_key,
                keys.arq_job(lease.job_id),
                *(key for key, _ in writes),
            ],
            args,
            what=f"{'acknowledging and ' if acked else ''}taking a batch of {lease.cid}",
            retry_for=max(0.0, lease.deadline - sent),
        )
        if result[0] == "batch":
            lease.extended(sent)
        return result

    async def _hand_back(self, lease: Lease) -> None:
        """The worker is stopping and cancelled the run: give the context (and its unacknowledged
        batch) back to the queue at once instead of waiting for the lease to expire."""
        if lease.lost:
            return
        try:
            async with asyncio.timeout(self.config.op_timeout):
                await asyncio.shield(self._step(lease, None, "handback"))
        except (DispatchError, TimeoutError, asyncio.CancelledError) as exc:
            log.warning("could not hand %s back (%s); it is taken over when its lease expires", lease.cid, exc)
        else:
            log.info("handed %s back to the queue", lease.cid)
