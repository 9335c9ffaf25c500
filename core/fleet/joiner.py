"""Inputs stored while their conversation's batch runs join that run (``core.busy`` steer, in the fleet).

The gateway's ingest publishes the conversation's id on ``<prefix>arrivals`` when a drain job is already responsible
for it; the worker running it (``Drainer.arrived``) wakes the batch's ``Joiner``, which moves what waits in the inbox
into the batch it holds (the ``JOIN`` script: fenced, up to ``REDIS_BATCH_SIZE`` inputs in the batch) and hands them
to the agent, whose run in progress reads them at its next step (or, when it has just ended, a run after it in the
same batch answers them). Whatever joins the batch is acknowledged with it, and run again with it after a crash,
in the parts it joined in (``Drainer``: the answers stored for the inputs each step read are replayed for them).
A join is handed to the run only once the replicas have it (``REDIS_MIN_REPLICAS``): a join a failover could lose
would leave the run answering inputs the batch no longer holds, and a batch run again in other parts than the
answers stored for it; unconfirmed, the batch is given up and run again by the next holder. A worker that misses
the notice (reconnecting) leaves the inputs to its next batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from .scope import RunScope

__all__ = ("Joiner",)

log = logging.getLogger("core.fleet")


class Joiner:
    """Follows one batch's conversation while it runs, and gives the inputs stored meanwhile to its run."""

    def __init__(
        self,
        scope: RunScope,
        *,
        cap: int,
        submit: Callable[[list[dict[str, Any]]], Coroutine[Any, Any, Any]],
        gate: Callable[[], bool] | None = None,
    ) -> None:
        self.scope = scope
        self.gate = gate
        """None: what arrives always joins. Else it joins only while this says so (the worker is not stopping; with
        collect and queue, nothing of the run's answer is shown yet, ``core.busy``); otherwise it waits in the inbox
        for the next batch."""
        """The batch."""
        self.cap = cap
        """Inputs the batch holds at most."""
        self.submit = submit
        """Hands decoded inbox entries to the agent (``agent.run`` with them); awaited before the batch is acked."""
        self.wake = asyncio.Event()
        """Set when inputs were stored for the conversation."""
        self._closing = False
        self._runs: list[asyncio.Task[Any]] = []

    async def follow(self) -> None:
        """Join what arrives until ``close``."""
        while True:
            await self.wake.wait()
            self.wake.clear()
            if self._closing:
                return
            await self._join()

    async def _join(self) -> None:
        if self.gate is not None and not self.gate():
            return
        scope = self.scope
        b = scope.backend
        ck = scope.keys
        result, confirmed = await b.call_once(
            b.join,
            [ck.lease, ck.batch, ck.inbox],
            [scope.lease.fence, scope.batch_id, self.cap, uuid.uuid4().hex, scope.take],
            what=f"joining inputs to the run of {ck.cid}",
        )
        if result[0] != "joined":
            return
        if not confirmed:  # (the join may be lost in a failover, and the run must answer what the batch holds)
            log.warning("%s: inputs joined the batch %s, unconfirmed by the replicas: given up", ck.cid, scope.batch_id)
            scope.lease.give_up()
            return
        entries: list[dict[str, Any]] = json.loads(result[1])
        log.info("%s: %d input(s) joined the batch %s running", ck.cid, len(entries), scope.batch_id)
        self._runs.append(asyncio.create_task(self.submit(entries), name=f"join:{ck.cid}"))

    async def close(self, following: asyncio.Task[None]) -> None:
        """The batch's run ended: stop joining (a join under way finishes), then wait for the runs of what joined."""
        self._closing = True
        self.wake.set()
        await following
        for run in self._runs:
            await run

    async def cancel(self, following: asyncio.Task[None]) -> None:
        """The batch was given up: stop following and cancel the runs of what joined (the batch, not acknowledged,
        holds them)."""
        for task in (following, *self._runs):
            task.cancel()
        for task in (following, *self._runs):
            with contextlib.suppress(BaseException):
                await task
