"""The Redis dispatcher, gateway side: ``agent.send`` stores the input in its context's inbox.

One script does it all atomically: drop a redelivered platform message (its dedupe key among the conversation's
recent ones, or not above the high-water mark of its source: Redis keeps no key per message), refuse past the
inbox cap, push the input, and schedule the context's drain job only if none is
scheduled (idle workers block on the queue, so one of them starts it at once). Workers
(``core.fleet.arq_worker``) run the inputs.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..chat_settings import ControlDefaults
from ..definitions import Context
from ..entries import InputRef, Log
from ..errors import BackpressureError
from .backend import RedisBackend
from .entry_format import ENTRY_FORMAT
from .options import QueueConfig
from .stops import STOP_KEEP, FleetStops

if TYPE_CHECKING:
    from ..dispatch import Runner

__all__ = (
    "DEDUPE_KEEP",
    "DEDUPE_TRIM_AT",
    "IngestResult",
    "RedisDispatcher",
    "dedupe_fields",
    "encode_entry",
)

DEDUPE_KEEP = 32
"""Dedupe keys of one conversation kept when its window is trimmed (the newest ones)."""
DEDUPE_TRIM_AT = 72
"""Fields of a conversation's meta hash (its dedupe keys and a few counters) past which the window is trimmed
back to ``DEDUPE_KEEP`` keys (keys younger than ``REDIS_DEDUPE_TTL`` stay however many there are)."""

_ORDERED = re.compile(r"^(.+):(\d{1,30})$")

IngestResult = str
"""``scheduled`` (a drain job was scheduled), ``queued`` (one already was), ``dup`` (a redelivery,
dropped) or ``full`` (refused: the inbox is at its cap)."""


def dedupe_fields(key: str | None, ordered: tuple[str, ...] = ()) -> tuple[str, str, str]:
    """``(seen field, floor field, number)`` of a dedupe key in the conversation's meta hash: the key itself
    (``d:<key>``), and for a key starting with one of ``ordered`` (``QueueConfig.ordered_dedupe``: prefixes whose
    number grows per conversation, such as a platform's message ids) and ending in a number the high-water mark of
    its source (``f:<source>``) and that number. Empty strings: no dedupe, or a key without an order (a random id)."""
    if not key:
        return "", "", ""
    numbered = _ORDERED.match(key) if ordered and key.startswith(ordered) else None
    if numbered is None:
        return f"d:{key}", "", ""
    number = numbered.group(2).lstrip("0") or "0"
    return f"d:{key}", f"f:{numbered.group(1)}", number


def encode_entry(context: Context, args: Any, input_ref: InputRef, *, bot: str | None = None) -> str:
    """One inbox entry: its format (``core.fleet.entry_format``), the context type, its arguments, the input, when it
    was stored, the name of the bot of the process that stored it (a worker runs only its own bot's) and, while
    tracing, the trace it belongs to (W3C ``traceparent``: the worker's run continues it)."""
    entry = {
        "v": ENTRY_FORMAT,
        "c": context.type,
        "a": context.schema.dump(args),
        "i": input_ref.model_dump(mode="json"),
        "t": time.time(),
    }
    if bot is not None:
        entry["b"] = bot
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
        self.stops = FleetStops(self.backend)
        """Stops pressed here reach the worker that holds the conversation."""

    @property
    def config(self) -> QueueConfig:
        """The queue settings."""
        return self.backend.config

    async def start(self, agent: Runner) -> None:
        """Remember the agent and check that Redis answers, waiting ``REDIS_RETRY_SECONDS`` for it (a failover
        while the process starts); ``DispatchError`` naming REDIS_URL if it does not."""
        self._agent = agent
        await self.backend.ping()

    async def submit(
        self, context: Context, args: Any, input_ref: InputRef, *, dedupe_key: str | None = None
    ) -> list[Log]:
        """Store the input in its context's inbox. Returns ``[]``; a redelivery (same ``dedupe_key`` among the
        conversation's recent ones, see ``dedupe_fields``) is dropped. Raises ``BackpressureError`` when the inbox
        is full (nothing was stored, retry later) and ``DispatchError`` when Redis cannot be reached."""
        agent = self._agent
        cid = agent.context_id(context, args) if agent else f"{context.type}:{context.key(args)}"
        controls = None
        if agent is not None:  # (the operator's pins and defaults, in memory: the conversation's own are in Redis)
            controls = agent.chat_policy.control_defaults(
                cid, agent.settings_parents(context, args), busy=self.config.busy, quiet_ms=self.config.quiet_ms
            )
        with tracing.span("ingest", kind="producer") as span:
            bot = (agent.bot.name or None) if agent is not None else None
            entry = encode_entry(context, args, input_ref, bot=bot)
            result = await self.ingest(cid, entry, dedupe_key=dedupe_key, controls=controls)
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

    async def ingest(
        self, cid: str, entry: str, *, dedupe_key: str | None = None, controls: ControlDefaults | None = None
    ) -> IngestResult:
        """The ingest script for an encoded entry; returns its ``IngestResult``. ``controls``: the operator's busy
        policy and quiet window for ``cid`` (``ChatPolicy.control_defaults``; None: ``REDIS_*``'s, nothing pinned),
        which the conversation's own choice replaces unless pinned (``set_controls``)."""
        b = self.backend
        keys = b.keys
        ck = keys.context(cid)
        job_id = keys.job_id(cid, uuid.uuid4().hex)
        seen, floor, number = dedupe_fields(dedupe_key, self.config.ordered_dedupe)
        if controls is None:
            controls = ControlDefaults(
                busy=self.config.busy, busy_pinned=False, quiet_ms=self.config.quiet_ms, quiet_pinned=False
            )
        result: str = await b.call(
            b.ingest,
            [ck.inbox, ck.meta, keys.queue, keys.active, ck.batch, ck.stop],
            [
                entry,
                self.config.inbox_cap,
                seen,
                floor,
                number,
                cid,
                job_id,
                self.config.claim_check_ms,
                "1" if b.confirms else "0",
                DEDUPE_TRIM_AT,
                DEDUPE_KEEP,
                int(self.config.dedupe_ttl * 1000),
                controls.quiet_ms,
                "1" if controls.quiet_pinned else "0",
                controls.busy,
                "1" if controls.busy_pinned else "0",
                keys.arrivals,
                keys.stops,
                int(STOP_KEEP * 1000),
            ],
            what=f"storing an input for {cid}",
            confirm=True,  # a platform is told it was stored (Telegram's offset, a webhook's 200)
        )
        return result

    async def stop_answer(self, context_id: str, *, by: str | None = None) -> bool:
        """A person pressed Stop: the worker that holds ``context_id`` stops its run, and a worker that takes what
        was stored before the press begins it stopped (``core.fleet.stops``). True when something was there to
        stop; raises ``DispatchError`` when Redis cannot be reached, ``NotAllowedError`` when ``by`` (not the chat's
        admin) has nothing of the answer (``FleetStops.press``)."""
        return await self.stops.press(context_id, by=by)

    async def set_controls(self, context_id: str, *, busy: str | None, quiet_ms: int | None) -> None:
        """``context_id`` chose its busy policy and quiet window (``/busy``, ``/quiet``; None: the operator's): kept
        in its meta hash (``busy``, ``quiet``), which the ingest and a claim read anyway, so a conversation that chose
        nothing costs nothing more. Raises ``DispatchError`` when Redis cannot be reached."""
        b = self.backend
        meta = b.keys.context(context_id).meta
        values = {"busy": busy, "quiet": None if quiet_ms is None else str(quiet_ms)}

        async def write() -> None:
            async with b.client.pipeline(transaction=True) as pipe:
                for name, value in values.items():
                    if value is None:
                        pipe.hdel(meta, name)
                    else:
                        pipe.hset(meta, name, value)
                await pipe.execute()

        await b.run(write, what=f"storing the busy policy and quiet window of {context_id}")

    async def stop(self) -> None:
        """Close the connection if this dispatcher opened it."""
        if self._owns_backend:
            await self.backend.close()
