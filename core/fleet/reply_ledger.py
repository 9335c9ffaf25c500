"""Idempotent replies: each reply is keyed by the batch it answers, stored before it is posted and
marked when posted, so a redelivered batch never posts twice; and the model's answers are stored so a
retried run replays them instead of asking the model again.

An output handler finds the ledger in ``ctx.state.options["reply_ledger"]`` (absent outside a queued
run) and follows this protocol::

    ledger = ctx.state.options.get("reply_ledger")
    slot = await ledger.begin(output_type, text)      # refused (DispatchError) if the lease is lost
    if not slot.done:
        for i, part in enumerate(split(slot.content)):
            if i < len(slot.message_ids):
                continue                              # posted by an earlier attempt
            msg = await post(part, nonce=slot.part_nonce(i))   # Discord: nonce + enforce_nonce
            await ledger.posted(slot, msg.id, done=i == last)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..errors import DispatchError
from ..models.base import Model, ModelRequest, ModelUsage
from .scope import RunScope, current_scope

__all__ = (
    "REPLY_LEDGER",
    "LeaseLostError",
    "RedisReplyLedger",
    "ReplayModel",
    "ReplyLedger",
    "ReplySlot",
)

REPLY_LEDGER = "reply_ledger"
"""The ``state.options`` key under which a queued run offers its ledger to output handlers."""


class LeaseLostError(DispatchError):
    """This worker no longer holds the context: another worker runs the batch; do not post."""


@dataclass(kw_only=True, eq=False)
class ReplySlot:
    """One reply of one batch."""

    key: str
    """``<context id>#<batch id>:<step>.<n>``: the same on every attempt at the batch."""
    output_type: str
    """The output type (``telegram:message``)."""
    content: str
    """The text to post: the one stored by the first attempt."""
    message_ids: list[str] = field(default_factory=list)
    """Platform ids of the parts already posted."""
    done: bool = False
    """True when every part was posted (by this attempt or an earlier one): post nothing."""
    pending: int | None = None
    """The part whose post request was sent and whose answer was not recorded yet (the intent, written
    before the request): after a crash, ``pending >= len(message_ids)`` means that part may or may not be
    shown (a platform without an idempotency key, such as Telegram, cannot tell)."""

    pending_text: str = ""
    """The text the ``pending`` part was posted with."""
    shown: list[str] = field(default_factory=list)
    """What each posted part showed when it was recorded (``content`` is the whole text received so far: a
    streamed reply's first message shows only its beginning)."""

    @property
    def uncertain(self) -> bool:
        """An earlier attempt sent a post for this reply and died before it heard back."""
        return self.pending is not None and self.pending >= len(self.message_ids)

    @property
    def nonce(self) -> str:
        """A short stable id for the platform's own dedupe (Discord ``nonce``, at most 25 characters)."""
        return hashlib.sha1(self.key.encode()).hexdigest()[:22]

    def part_nonce(self, index: int) -> str:
        """The nonce of part ``index`` of a reply split into several messages."""
        return f"{self.nonce}{index:03d}"[:25]

    @classmethod
    def load(cls, key: str, dumped: str) -> ReplySlot:
        """The slot ``key`` as an earlier attempt stored it (``dump``)."""
        data = json.loads(dumped)
        return cls(
            key=key,
            output_type=data["type"],
            content=data["content"],
            message_ids=list(data["ids"]),
            done=bool(data["done"]),
            pending=data.get("p"),
            pending_text=data.get("pt", ""),
            shown=list(data.get("sh", ())),
        )

    def dump(self) -> str:
        data: dict[str, object] = {
            "type": self.output_type,
            "content": self.content,
            "ids": self.message_ids,
            "done": self.done,
        }
        if self.shown:
            data["sh"] = self.shown
        if self.pending is not None:
            data["p"] = self.pending
            data["pt"] = self.pending_text
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


@runtime_checkable
class ReplyLedger(Protocol):
    """What an output handler uses to post a reply exactly once."""

    async def begin(self, output_type: str, content: str) -> ReplySlot:
        """Store the reply before posting it (or find the one an earlier attempt stored)."""
        ...

    async def posted(self, slot: ReplySlot, message_id: str | None = None, *, done: bool = True) -> None:
        """Record a posted part (its platform id) and whether the reply is complete."""
        ...

    @property
    def valid(self) -> bool:
        """Whether this worker may still show anything for the batch (checked before each post or edit of a
        reply begun earlier, such as one being streamed): False once its lease is lost or may have expired."""
        ...


class RedisReplyLedger:
    """The ledger of one attempt at one batch, kept in ``<prefix>{<cid>}:ledger:<batch id>``."""

    def __init__(self, scope: RunScope) -> None:
        self.scope = scope
        """The attempt."""

    @property
    def valid(self) -> bool:
        """Whether this worker still holds the context, as far as it can tell (no round trip)."""
        return self.scope.lease.still_held()

    async def begin(self, output_type: str, content: str) -> ReplySlot:
        """Fenced: raises ``LeaseLostError`` when this worker no longer holds the context."""
        scope = self.scope
        if not scope.lease.still_held():
            raise LeaseLostError(f"lease on {scope.keys.cid} lost: reply not posted (another worker answers)")
        field_name = f"r{scope.step}.{scope.replies}"
        scope.replies += 1
        slot = ReplySlot(
            key=f"{scope.keys.cid}#{scope.batch_id}:{scope.step}.{scope.replies - 1}",
            output_type=output_type,
            content=content,
        )
        b = scope.backend
        result = await b.call(
            b.begin_reply,
            [scope.keys.lease, scope.ledger_key],
            [
                scope.lease.fence,
                field_name,
                slot.dump(),
                f"m{scope.step}",
                "".join(scope.text),
                int(b.config.ledger_ttl * 1000),
                *(item for pair in scope.marks.items() for item in pair),
            ],
            what=f"storing a reply for {scope.keys.cid}",
            retry_for=max(0.0, scope.lease.deadline - time.monotonic()),
            confirm=True,
        )
        scope.marks.clear()
        if result[0] == "stale":
            scope.lease.lost = True
            raise LeaseLostError(f"lease on {scope.keys.cid} lost: reply not posted (another worker answers)")
        if result[0] == "exists":
            return ReplySlot.load(slot.key, result[1])
        return slot

    async def posted(self, slot: ReplySlot, message_id: str | None = None, *, done: bool = True) -> None:
        """Record the slot as it is now (a posted part's id, the intent to post one, completion), written
        at once: a crash right after a post should find the post recorded. Not fenced: a mark records a
        fact, even from a worker that lost its lease meanwhile."""
        if message_id is not None:
            slot.message_ids.append(str(message_id))
        slot.done = done
        await self.scope.record("r" + slot.key.rsplit(":", 1)[1], slot.dump())


def _replayable(text: str, complete: bool) -> str:
    """A stored answer as the engine should see it again: a partial one (stored when a reply began)
    is cut after its last closed output, so nothing half-written is delivered."""
    if complete:
        return text
    end = text.rfind("</output")
    if end < 0:
        return ""
    close = text.find(">", end)
    return text[: close + 1] + "</response>" if close >= 0 else ""


class ReplayModel:
    """Wraps the worker's model: in a redelivered batch, a step whose answer was stored is replayed
    instead of asking the model again; answers with action calls are stored when they end."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        """The real model."""
        self.name = inner.name
        self.vision: bool = inner.vision
        """Whether the real model sees images (the worker shows them only then)."""
        self.model: str = inner.model
        """The real model's configured model name, when it has one (usage is counted by model)."""

    @property
    def last_usage(self) -> ModelUsage | None:
        """The real model's usage of its last call: a replayed step calls nothing, so it is counted once."""
        return self.inner.last_usage

    def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Stream the stored answer of this step, or the inner model's (recorded as it goes)."""
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[str]:
        scope = current_scope()
        if scope is None:
            async for chunk in self.inner.stream(request):
                yield chunk
            return
        await scope.flush_marks()  # before the (slow) model call, never after it
        scope.step += 1
        scope.replies = 0
        scope.text = []
        stored = scope.cache.get(f"m{scope.step}")
        if stored is not None:
            replay = _replayable(stored, scope.cache.get(f"m{scope.step}:done") == "1")
            if replay:
                scope.text.append(replay)
                yield replay
                return
        async for chunk in self.inner.stream(request):
            scope.text.append(chunk)
            yield chunk
        text = "".join(scope.text)
        if "<action_call" in text and scope.lease.valid:
            b = scope.backend
            await b.call(
                b.store_model,
                [scope.keys.lease, scope.ledger_key],
                [scope.lease.fence, f"m{scope.step}", text, int(b.config.ledger_ttl * 1000)],
                what=f"storing a model answer for {scope.keys.cid}",
                retry_for=max(0.0, scope.lease.deadline - time.monotonic()),
            )
