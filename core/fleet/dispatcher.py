"""The Redis dispatcher, gateway side: ``agent.send`` stores the input in its context's inbox.

One script does it all atomically: drop a redelivered platform message (dedupe key with a TTL),
refuse past the inbox cap, push the input, and schedule the context's drain job only if none is
scheduled (idle workers block on the queue, so one of them starts it at once). Workers
(``core.fleet.arq_worker``) run the inputs.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..definitions import Context
from ..entries import InputRef, Log
from ..errors import BackpressureError
from .backend import RedisBackend
from .options import QueueConfig

if TYPE_CHECKING:
    from ..host import Runner

__all__ = ("IngestResult", "RedisDispatcher", "encode_entry")

IngestResult = str
"""``scheduled`` (a drain job was scheduled), ``queued`` (one already was), ``dup`` (a redelivery,
dropped) or ``full`` (refused: the inbox is at its cap)."""


def encode_entry(context: Context, args: Any, input_ref: InputRef) -> str:
    """One inbox entry: the context type, its arguments, the input, when it was stored and, while tracing, the
    trace it belongs to (W3C ``traceparent``: the worker's run continues it)."""
    entry = {
        "c": context.type,
        "a": context.schema.dump(args),
        "i": input_ref.model_dump(mode="json"),
        "t": time.time(),
    }
    parent = tracing.traceparent()
    if parent is not None:
        entry["tp"] = parent
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False)


class RedisDispatcher:
    """Puts inputs into per-context Redis inboxes; ``submit`` returns ``[]`` once the input is stored."""

    distributed = True
    """Runs happen in any worker: the agent keeps no state of a context between runs in memory."""

    def __init__(self, backend: RedisBackend | QueueConfig) -> None:
        owns = isinstance(backend, QueueConfig)
        self.backend = RedisBackend(backend) if isinstance(backend, QueueConfig) else backend
        """The connection (shared with the memory store and the worker)."""
        self._owns_backend = owns
        self._agent: Runner | None = None

    @property
    def config(self) -> QueueConfig:
        """The queue settings."""
        return self.backend.config

    async def start(self, agent: Runner) -> None:
        """Remember the agent and check that Redis answers (``DispatchError`` naming REDIS_URL if not)."""
        self._agent = agent
        await self.backend.ping()

    async def submit(
        self, context: Context, args: Any, input_ref: InputRef, *, dedupe_key: str | None = None
    ) -> list[Log]:
        """Store the input in its context's inbox. Returns ``[]``; a redelivery (same ``dedupe_key``
        within ``dedupe_ttl``) is dropped. Raises ``BackpressureError`` when the inbox is full (nothing
        was stored, retry later) and ``DispatchError`` when Redis cannot be reached."""
        cid = self._agent.context_id(context, args) if self._agent else f"{context.type}:{context.key(args)}"
        with tracing.span("ingest", kind="producer") as span:
            result = await self.ingest(cid, encode_entry(context, args, input_ref), dedupe_key=dedupe_key)
            if span.is_recording():
                span.set_attributes(
                    {
                        "messaging.system": "redis",
                        "messaging.operation.type": "send",
                        "bots.context.id": tracing.ident(cid),
                        "bots.ingest.result": result,
                    }
                )
        if result == "full":
            raise BackpressureError(
                f"the inbox of {cid} holds {self.config.inbox_cap} inputs waiting to run: nothing was stored, "
                "retry later; add workers (bots worker) or raise REDIS_INBOX_CAP if bursts are expected",
                wait=self.config.full_wait,
            )
        return []

    async def ingest(self, cid: str, entry: str, *, dedupe_key: str | None = None) -> IngestResult:
        """The ingest script for an encoded entry; returns its ``IngestResult``."""
        b = self.backend
        keys = b.keys
        ck = keys.context(cid)
        job_id, job_key, payload = b.new_job(cid)
        ttl_ms = int(self.config.dedupe_ttl * 1000) if dedupe_key else 0
        result: str = await b.call(
            b.ingest,
            [ck.inbox, ck.meta, ck.dedupe(dedupe_key or "-"), keys.queue, keys.active, job_key],
            [
                entry,
                self.config.inbox_cap,
                ttl_ms,
                cid,
                job_id,
                payload,
                b.job_ttl_ms,
                self.config.claim_check_ms,
                "1" if b.confirms else "0",
            ],
            what=f"storing an input for {cid}",
            confirm=True,  # a platform is told it was stored (Telegram's offset, a webhook's 200)
        )
        return result

    async def stop(self) -> None:
        """Close the connection if this dispatcher opened it."""
        if self._owns_backend:
            await self.backend.close()
