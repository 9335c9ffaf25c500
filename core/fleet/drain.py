"""The drain job: what a worker does for one context it was given.

claim (take the lease only if this job is the scheduled one) and take a batch (an unacknowledged one
first: crash redelivery), in one script -> ``agent.run`` -> fenced ack together with the memory writes
and the next take, again in one script -> ... -> release when the inbox is empty, or hand off after
``handoff_batches`` so a busy channel cannot hold a worker slot. A renewal task keeps the lease; losing
it cancels the run.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..busy import QUIET_WINDOWS, BusyPolicy
from ..chat_settings import ChatSettings, ControlDefaults
from ..deleted import split_forgets
from ..entries import InputRef
from ..errors import DispatchError
from .backend import RedisBackend
from .batch_trace import batch_span
from .entry_format import ENTRY_FORMAT, newest_format
from .joiner import Joiner
from .reply_ledger import RedisReplyLedger
from .scope import Lease, RunScope
from .stops import covers
from .usage_store import USAGE_TTL

if TYPE_CHECKING:
    from ..definitions import Context
    from ..dispatch import Runner

__all__ = ("MEMORY_KINDS", "DrainStats", "Drainer")

log = logging.getLogger("core.fleet.drain")

MEMORY_KINDS = ("context", "shape", "working", "statelog", "settings")
"""The memory-store kinds ``agent.load_state`` reads: fetched with each batch, in the same script (the chat's
settings too: written by the gateway's commands, read at the start of each batch as a separate read would be)."""


FOREIGN_PAUSE = 1.0
"""Seconds a worker waits after handing back a batch stored for another bot, or in a newer entry format than it
reads (so it does not take it again at once)."""


class _ForeignBatch(Exception):
    """A batch this worker leaves for another: stored by a gateway running another bot than this worker's, or holding
    an entry of a newer format than it reads (``core.fleet.entry_format``)."""


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
    handed_back: int = 0
    """Batches left for another worker: another bot's, or of a newer entry format than this worker reads."""


class Drainer:
    """Runs drain jobs for ``agent`` (one per context at a time, cluster-wide)."""

    def __init__(self, agent: Runner, backend: RedisBackend) -> None:
        self.agent = agent
        """The agent whose contexts are run."""
        self.backend = backend
        """The connection."""
        self.config = backend.config
        self.stopping = False
        """Set when the worker stops: running jobs hand their context back after the current batch."""
        self.stats = DrainStats()
        """Counters."""
        self.entry_format = ENTRY_FORMAT
        """The newest inbox entry format this worker reads; a batch holding a newer one is handed back."""
        self._local: dict[str, tuple[asyncio.Task[Any], Lease]] = {}
        self._starting: dict[str, bool] = {}  # batches taken whose run has not begun: stopped before it?
        self._joiners: dict[str, Joiner] = {}  # the batches running here, for the inputs that join them (steer)
        self._policies: dict[str, BusyPolicy] = {}  # the busy policy of each conversation whose batch runs here

    # -- the job ---------------------------------------------------------------------------------------

    async def drain(self, ctx: dict[str, Any], cid: str) -> str:
        """The arq job function. Returns what happened: ``released``, ``handed_off``, ``lost``,
        ``stale`` (another job is responsible now) or ``held`` (another worker runs this job)."""
        job_id = str(ctx["job_id"])
        self.stats.jobs += 1
        lease = Lease(
            cid=cid,
            token="",
            job_id=job_id,
            owner=f"{job_id}#{uuid.uuid4().hex[:12]}",
            seconds=self.config.lease_seconds,
        )
        lease.on_lost = lambda: self._lose(lease)
        first = await self.claim(lease)
        if first[0] in ("stale", "held"):
            log.debug("drain job %s for %s: %s", job_id, cid, first[0])
            return str(first[0])
        me = asyncio.current_task()
        assert me is not None
        previous = self._local.get(cid)
        self._local[cid] = (me, lease)
        self.agent.observe("lease_claimed", cid)
        try:
            if previous is not None and not previous[0].done():
                previous[1].lost = True  # a job of ours that lost the lease is still winding down
                self.agent.cancel_run(cid)
                await asyncio.wait({previous[0]})
            return await self._batches(lease, first)
        finally:
            lease.ended = True
            self.agent.observe("lease_lost" if lease.lost else "lease_released", cid)
            if self._local.get(cid, (None,))[0] is me:
                del self._local[cid]
                self._policies.pop(cid, None)

    async def claim(self, lease: Lease) -> list[Any]:
        """Claim the context for ``lease.job_id`` and take its first batch (one script)."""
        result = await self._step(lease, None, "take")
        if result[0] not in ("stale", "held"):
            lease.token = str(result[1])
        return result

    async def renew_forever(self) -> None:
        """Renew the leases of every context running here, all in one round trip, every
        ``renew_interval`` seconds; a lease that cannot be renewed is lost and its run cancelled.
        ``QueueWorker`` runs this next to the arq loop."""
        while True:
            await asyncio.sleep(self.config.renew_interval)
            await self.renew_once()

    async def renew_once(self) -> None:
        """One round of renewals."""
        leases = [lease for _, lease in self._local.values() if not lease.lost and not lease.ended and lease.token]
        if not leases:
            return
        b = self.backend
        sent = time.monotonic()

        async def renew_all() -> list[Any]:
            # ``async with``: a pipeline that carries scripts loads them (SCRIPT EXISTS / LOAD) on a connection of
            # its own before ``execute``'s own clean-up covers it; with Redis away or restarted without them, that
            # connection was never given back (a leak, and a ResourceWarning when the pipeline was collected)
            async with b.client.pipeline(transaction=False) as pipe:
                for lease in leases:
                    ck = b.keys.context(lease.cid)
                    await b.renew(
                        keys=[ck.lease, b.keys.active], args=[lease.fence, self.config.lease_ms, lease.cid], client=pipe
                    )
                results: list[Any] = await pipe.execute()
            return results

        deadline = min(lease.deadline for lease in leases)
        try:
            results = await b.run(renew_all, what="renewing leases", retry_for=max(0.0, deadline - sent))
        except DispatchError as exc:
            now = time.monotonic()
            for lease in leases:
                if now >= lease.deadline and not lease.ended:
                    log.warning("cannot renew the lease on %s: %s", lease.cid, exc)
                    self._lose(lease)
            return
        for lease, ok in zip(leases, results, strict=True):
            if ok:
                lease.extended(sent)
                self.agent.observe("lease_renewed", lease.cid)
            elif not lease.ended:  # (a lease released while this renewal was on its way is not lost)
                self._lose(lease)

    def stop(self, cid: str) -> bool:
        """A Stop was pressed for ``cid`` (``core.fleet.stops``): its run here stops, or a batch taken here whose run
        has not begun yet begins stopped. False when this worker holds nothing of ``cid``."""
        if cid in self._starting:
            self._starting[cid] = True
            log.info("%s: Stop pressed before its run began: it begins stopped", cid)
            return True
        stopped = self.agent.stop_answer(cid)
        if stopped:
            log.info("%s: Stop pressed: its run is stopped", cid)
        return stopped

    def arrived(self, cid: str) -> None:
        """Inputs were stored for ``cid`` (``core.fleet.joiner``): the batch running here, if any, takes them."""
        joiner = self._joiners.get(cid)
        if joiner is not None and not self.stopping:  # (a stopping worker takes no new work: it waits for the next)
            joiner.wake.set()

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

    async def _batches(self, lease: Lease, result: list[Any]) -> str:
        done = 0
        while True:
            status = str(result[0])
            if status == "stale":
                self._lose(lease)
                return "lost"
            if result[5]:
                self.stats.dead += 1
                log.error(
                    "batch %s of %s failed %d times: moved to %s",
                    result[5],
                    lease.cid,
                    self.config.max_attempts,
                    self.backend.keys.dead,
                )
            if status in ("batch", "quiet") and result[7] != "":  # (the quiet window the take found)
                lease.quiet_ms = int(result[7])
            if status == "quiet":  # (core.busy: the conversation is not quiet yet; the lease is kept meanwhile)
                try:
                    if not self.stopping:
                        await asyncio.sleep(min(int(result[3]), lease.quiet_ms) / 1000)
                    result = await self._step(lease, None, "handoff" if self.stopping else "take")
                except DispatchError as exc:
                    log.warning("giving %s up: %s", lease.cid, exc)
                    self._lose(lease)
                    return "lost"
                continue
            if status != "batch":
                return status
            scope = RunScope(
                backend=self.backend,
                keys=self.backend.keys.context(lease.cid),
                lease=lease,
                batch_id=str(result[2]),
                attempt=int(result[3]),
                take=str(result[9] or ""),
            )
            for kind, value in zip(MEMORY_KINDS, result[10:], strict=False):
                scope.loaded[scope.keys.memory(kind)] = value
            entries = json.loads(result[4])
            stop = result[10 + len(MEMORY_KINDS)] if len(result) > 10 + len(MEMORY_KINDS) else None
            self._starting[lease.cid] = covers(stop, scope.batch_id, entries)
            cuts: list[int] | None = None
            if result[6] == "1":  # an earlier attempt did not finish: replay what it stored
                self.stats.redelivered += 1
                scope.cache = await self._ledger(scope)
                cuts = sorted({int(cut) for cut in str(result[8]).split(",") if cut.isdigit()} - {0})
            try:
                try:
                    ok = await self._run(scope, entries, cuts)
                finally:
                    self._starting.pop(lease.cid, None)
            except (
                _ForeignBatch
            ):  # another bot's, or newer: handed back untouched (no attempt counted), for its workers
                self.stats.handed_back += 1
                await self._close(scope, acknowledged=False)
                await self._hand_back(lease)
                await asyncio.sleep(FOREIGN_PAUSE)
                return "handed back"
            except asyncio.CancelledError:
                task = asyncio.current_task()
                await self._close(scope, acknowledged=False)
                if lease.lost and task is not None and not task.cancelling():
                    return "lost"  # the renewer cancelled the run
                self.agent.cancel_run(lease.cid)
                await self._hand_back(lease)
                raise
            if not lease.still_held():
                # Lost by any path (a renewal refused, a stale or unconfirmed write, the deadline passed unrenewed):
                # the batch is never acknowledged by this holder, whatever the run made of the failure (the engine
                # takes an output's error as undelivered and goes on); the next holder runs it again whole.
                await self._close(scope, acknowledged=False)
                return "lost"
            acked: RunScope | None = None
            if ok:
                acked = scope
                done += 1
            else:
                self.stats.failed += 1
                await self._close(scope, acknowledged=False)  # the batch comes again: it must know what was posted
                await asyncio.sleep(min(1.0, 0.1 * scope.attempt))
            handoff = acked is not None and (done >= self.config.handoff_batches or self.stopping)
            try:
                result = await self._step(lease, acked, "handoff" if handoff else "take")
            except DispatchError as exc:
                log.warning("giving %s up: %s", lease.cid, exc)
                if acked is not None:
                    await self._close(acked, acknowledged=False)
                self._lose(lease)
                return "lost"
            if acked is not None and result[:2] == ["stale", "take"]:
                log.warning(
                    "batch %s of %s: the take acknowledged is not the one Redis holds (a failover lost it): not "
                    "acknowledged, and its messages are answered again",
                    acked.batch_id,
                    lease.cid,
                )
            if acked is not None:
                await self._close(acked, acknowledged=result[0] != "stale")
                if result[0] != "stale":
                    self.stats.batches += 1
                    self.stats.inputs += len(entries)

    async def _ledger(self, scope: RunScope) -> dict[str, str]:
        """What the earlier attempts at this take stored: nothing when the ledger is another take's (one a failover
        lost, under the same batch id: its answers were to other inputs; the first fenced write drops it)."""
        client = self.backend.client
        cache: dict[str, str] = await self.backend.run(
            lambda: client.hgetall(scope.ledger_key), what=f"reading the ledger of {scope.keys.cid}"
        )
        if cache.get("take", scope.take) != scope.take:
            log.warning(
                "the ledger of batch %s of %s is another take's (a Redis failover lost that take): not replayed",
                scope.batch_id,
                scope.keys.cid,
            )
            return {}
        return cache

    async def _run(self, scope: RunScope, entries: list[dict[str, Any]], cuts: Sequence[int] | None = None) -> bool:
        """Run one batch; True when it may be acknowledged. ``cuts``: None for its first attempt; for an attempt
        again, where inputs joined the batch in the earlier ones (``core.fleet.joiner``; empty: none did)."""
        newest = newest_format(entries)
        if newest > self.entry_format:
            log.warning(
                "a batch of %s holds inbox entries of format %s, and this worker reads formats up to %d: it is left "
                "for a worker of a newer version (a rolling upgrade: upgrade the workers before the gateways)",
                scope.keys.cid,
                newest if newest < 1 << 30 else "unknown",
                self.entry_format,
            )
            raise _ForeignBatch
        last = entries[-1]
        context = self.agent.contexts.get(last["c"])
        if context is None:
            log.error(
                "context type %r of %s is not defined in this worker: run the same bot version in gateway and workers",
                last["c"],
                scope.keys.cid,
            )
            return False
        stored_by = {entry["b"] for entry in entries if "b" in entry}
        mine = self.agent.bot.name
        if mine and stored_by - {mine}:
            log.error(
                "a batch of %s was stored by a gateway running the bot %s, and this worker runs %r: it is left for a "
                "worker that runs the same bot (give bots gateway and bots worker the same APP, or the same BOT_APP)",
                scope.keys.cid,
                " and ".join(repr(name) for name in sorted(stored_by)),
                mine,
            )
            raise _ForeignBatch
        try:
            args = context.schema.validate(last["a"])
            inputs = [InputRef.model_validate(entry["i"]) for entry in entries]
        except Exception:
            log.exception("undecodable batch %s of %s", scope.batch_id, scope.keys.cid)
            return False
        batch = f"{scope.keys.cid}#{scope.batch_id}"  # (the same in every attempt at it: core.reply_ledger.BATCH)
        parts = [cut for cut in cuts if cut < len(entries)] if cuts is not None else []
        inputs, forgotten = split_forgets(inputs[: parts[0] if parts else len(inputs)])  # (core.deleted: messages
        # their authors deleted leave first)
        ledger = RedisReplyLedger(scope)
        busy = self._policies[scope.keys.cid] = self._busy(scope, context, args)
        token = scope.enter()
        try:
            if forgotten:
                await self.agent.drop_messages(context, args, forgotten)
            stopped = self._starting.pop(scope.keys.cid, False)  # (no wait from here until the run is in the table)
            if stopped:
                log.info(
                    "batch %s of %s: Stop was pressed before it began; recorded, not answered",
                    scope.batch_id,
                    scope.keys.cid,
                )

            async def rejoin(joined: list[dict[str, Any]], *, stopped: bool = False) -> None:
                refs, gone = split_forgets([InputRef.model_validate(entry["i"]) for entry in joined])
                if gone:  # (a deletion sent while the message's run goes on: it leaves that run)
                    await self.agent.drop_messages(context, args, gone)
                if refs:
                    await self.agent.run(context, args, refs, batch=batch, ledger=ledger, stopped=stopped)

            with batch_span(entries, scope):
                if cuts is not None:  # (a batch run again: the earlier attempts' answers were stored step by step
                    # for the inputs each step read. Given to the agent whole, the first replayed answer would stand
                    # for inputs that joined later, which it never read; an input joining now could be read by a
                    # step whose answer is replayed. So the parts go in the order they came, one run after the
                    # other, and nothing joins this attempt: what is stored meanwhile waits for the next batch)
                    if parts:
                        log.warning(
                            "batch %s of %s is run again in %d parts (inputs joined it): a part that a replayed step "
                            "of the model read is recorded, not answered again",
                            scope.batch_id,
                            scope.keys.cid,
                            len(parts) + 1,
                        )
                    if inputs:
                        await self.agent.run(context, args, inputs, batch=batch, ledger=ledger, stopped=stopped)
                    for start, end in itertools.pairwise([*parts, len(entries)]):
                        part = entries[start:end]
                        ids = {str(entry["i"].get("id", "")) for entry in part}
                        answered = "" not in ids and ids <= scope.replayed_inputs  # (the reply ledger says so)
                        if answered:
                            log.info(
                                "batch %s of %s: %d input(s) that joined it were answered by a step replayed from "
                                "the earlier attempt: recorded, not answered again",
                                scope.batch_id,
                                scope.keys.cid,
                                len(part),
                            )
                        await rejoin(part, stopped=stopped or answered)
                elif not inputs:
                    pass  # (only deletions)
                elif busy is BusyPolicy.INTERRUPT:
                    await self.agent.run(context, args, inputs, batch=batch, ledger=ledger, stopped=stopped)
                else:  # (core.busy: what is stored meanwhile joins the run, core.fleet.joiner; with collect and
                    # queue only while nothing of its answer is shown: its model call starts again with it)

                    async def submit(joined: list[dict[str, Any]]) -> None:
                        entries.extend(joined)  # (acknowledged with the batch: counted with it)
                        await rejoin(joined)

                    cid = scope.keys.cid
                    steer = busy is BusyPolicy.STEER  # (a stopping worker takes no new work: it waits for the next)

                    def gate() -> bool:
                        return not self.stopping and (steer or self.agent.unseen(cid))

                    joiner = self._joiners[cid] = Joiner(scope, cap=self.config.batch_size, submit=submit, gate=gate)
                    following = asyncio.create_task(joiner.follow(), name=f"joiner:{scope.keys.cid}")
                    try:
                        await self.agent.run(context, args, inputs, batch=batch, ledger=ledger, stopped=stopped)
                        await joiner.close(following)
                    except BaseException:
                        await joiner.cancel(following)
                        raise
                    finally:
                        self._joiners.pop(scope.keys.cid, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the agent logged its traceback ("run of ... crashed")
            log.error("run of %s (batch %s, attempt %d) failed: %s", scope.keys.cid, scope.batch_id, scope.attempt, exc)
            return False
        finally:
            RunScope.exit(token)
        return True

    def _defaults(self, cid: str, parents: tuple[str, ...] = ()) -> ControlDefaults:
        """The operator's busy policy and quiet window for ``cid`` (its pins, else ``REDIS_*``'s), in memory."""
        cfg = self.config
        return self.agent.chat_policy.control_defaults(cid, parents, busy=cfg.busy, quiet_ms=cfg.quiet_ms)

    def _busy(self, scope: RunScope, context: Context, args: Any) -> BusyPolicy:
        """What an input stored while this batch runs does (``core.busy``): the operator's pin, else the
        conversation's own ``/busy`` in its settings, read with the batch (the gateway's ingest reads the copy in the
        meta hash, ``RedisDispatcher.set_controls``), else ``BOT_BUSY``."""
        defaults = self._defaults(scope.keys.cid, self.agent.settings_parents(context, args))
        own = (
            None
            if defaults.busy_pinned
            else ChatSettings.stored(scope.loaded.get(scope.keys.memory("settings"))).busy_policy()
        )
        return own if own is not None else BusyPolicy(defaults.busy)

    async def _step(self, lease: Lease, acked: RunScope | None, mode: str) -> list[Any]:
        b, cfg = self.backend, self.config
        keys = b.keys
        ck = keys.context(lease.cid)
        job_id = "" if mode == "take" else keys.job_id(lease.cid, uuid.uuid4().hex)  # take schedules nothing
        take = uuid.uuid4().hex[:16] if mode == "take" else ""  # (the token of a batch taken now: see scripts.py)
        writes = list(acked.staged.items()) if acked is not None else []
        usage = list(acked.usage.items()) if acked is not None else []
        reads = [*(ck.memory(kind) for kind in MEMORY_KINDS), ck.stop] if mode == "take" else []
        queue = self._policies.get(lease.cid) is BusyPolicy.QUEUE
        args: list[Any] = [
            lease.fence,
            lease.cid,
            acked.batch_id if acked is not None else "",
            mode,
            1 if acked is not None and queue else cfg.batch_size,  # (queue: one run per input waiting)
            cfg.lease_ms,
            cfg.max_attempts,
            job_id,
            cfg.claim_check_ms,
            lease.job_id,
            lease.owner,
            len(writes),
            len(reads),
            len(usage),
            USAGE_TTL,
            max(lease.quiet_ms, self._defaults(lease.cid).quiet_ms),  # (a take looks at the window's times then)
            QUIET_WINDOWS,
            take,
            acked.take if acked is not None else "",
        ]
        args.extend("" if value is None else value for _, value in writes)
        for _, counts in usage:
            args.extend(counts)
        sent = time.monotonic()
        step_keys = [
            ck.lease,
            ck.batch,
            ck.inbox,
            ck.meta,
            keys.queue,
            keys.active,
            keys.dead,
            acked.ledger_key if acked is not None else ck.ledger("-"),
            *(key for key, _ in writes),
            *reads,
            *(key for key, _ in usage),
        ]
        what = f"{'acknowledging and ' if acked else ''}taking a batch of {lease.cid}"
        retry_for = max(0.0, lease.deadline - sent) if lease.token else None
        result: list[Any]
        if acked is None:
            result = await b.call(b.step, step_keys, args, what=what, retry_for=retry_for)
        else:  # the batch's replies were posted: its acknowledgement must survive a failover
            result, confirmed = await b.call_once(b.step, step_keys, args, what=what, retry_for=retry_for)
            if not confirmed and result[0] != "stale":
                await self._confirm_ack(lease, acked)
        if result[0] in ("batch", "quiet"):
            lease.extended(sent)
        elif lease.token and result[0] in ("released", "handed_off"):
            lease.ended = True  # the lease is gone with it: nothing to renew any more
        return result

    async def _confirm_ack(self, lease: Lease, acked: RunScope) -> None:
        """Hold on after an acknowledgement too few replicas confirmed: as long as it is on the primary (a
        failover may have lost it), write and ``WAIT`` again, for up to ``REDIS_RETRY_SECONDS``. Raises
        ``DispatchError`` when the replicas do not come back in time or the acknowledgement was lost (the
        caller then gives the context up, writing what was posted into the batch's ledger if it is there)."""
        b = self.backend
        ck = b.keys.context(lease.cid)
        there = await b.call(
            b.confirm_ack,
            [ck.batch, ck.meta],
            [acked.batch_id, acked.take],
            what=f"confirming the acknowledgement of {lease.cid} on the replicas",
            confirm=True,
        )
        if not there:
            raise DispatchError(
                f"the acknowledgement of batch {acked.batch_id} of {lease.cid} was lost in a Redis failover: the "
                "batch is run again (what was posted is recorded, so nothing is posted twice)"
            )

    async def _close(self, scope: RunScope, *, acknowledged: bool) -> None:
        """End an attempt; if it was not acknowledged, write its posted marks (best effort)."""
        try:
            async with asyncio.timeout(self.config.op_timeout):
                await asyncio.shield(scope.close(acknowledged=acknowledged))
        except (DispatchError, TimeoutError, asyncio.CancelledError) as exc:
            log.warning("could not record posted replies of %s (%s): a retry may post them again", scope.keys.cid, exc)

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
