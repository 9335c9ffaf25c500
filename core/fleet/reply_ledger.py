"""Idempotent replies: each reply is keyed by the batch it answers, stored before it is posted and
marked when posted, so a redelivered batch never posts twice; and the model's answers are stored so a
retried run replays them instead of asking the model again.

An output handler finds the ledger in ``ctx.state.ledger`` (None outside a queued run) and follows the protocol
of ``core.reply_ledger``::

    ledger = ctx.state.ledger
    slot = await ledger.begin(output_type, text)      # refused (DispatchError) if the lease is lost
    if not slot.done:
        for i, part in enumerate(split(slot.content)):
            if i < len(slot.message_ids):
                continue                              # posted by an earlier attempt
            msg = await post(part, nonce=slot.part_nonce(i))   # Discord: nonce + enforce_nonce
            await ledger.posted(slot, msg.id, done=i == last)
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from ..errors import DispatchError
from ..models.base import Model, ModelRequest, ModelUsage, closing_stream
from ..reply_ledger import ReplyLedger, ReplySlot
from .scope import RunScope, current_scope

__all__ = (
    "LeaseLostError",
    "RedisReplyLedger",
    "ReplayModel",
    "ReplyLedger",
    "ReplySlot",
)


class LeaseLostError(DispatchError):
    """This worker no longer holds the context: another worker runs the batch; do not post."""


class RedisReplyLedger:
    """The ledger of one attempt at one batch, kept in ``<prefix>{<cid>}:ledger:<batch id>``."""

    def __init__(self, scope: RunScope) -> None:
        self.scope = scope
        """The attempt."""
        self._named: dict[str, int] = {}

    @property
    def valid(self) -> bool:
        """Whether this worker still holds the context, as far as it can tell (no round trip)."""
        return self.scope.lease.still_held()

    async def begin(self, output_type: str, content: str, *, intent: str | None = None) -> ReplySlot:
        """Fenced: raises ``LeaseLostError`` when this worker no longer holds the context. ``intent``: the text of
        the reply's first message, about to be posted: stored with the entry as its intent (see ``begin_many``)."""
        return (await self.begin_many(output_type, [content], intent=intent))[0]

    async def begin_named(self, output_type: str, name: str, content: str) -> ReplySlot:
        """``begin`` for something posted besides the replies (a picture, a spoken reply), keyed by ``name`` (a
        digest of what was asked for: letters, digits and dots) and by how many times this attempt asked for that
        name, rather than by its place among the step's replies: an action runs beside the step's outputs, so its
        place among them may differ from one attempt to the next, its name does not. Fenced like ``begin``."""
        seen = self._named.get(name, 0)
        self._named[name] = seen + 1
        return (await self.begin_many(output_type, [content], names=[f"x.{name}.{seen}"]))[0]

    async def begin_many(
        self, output_type: str, contents: list[str], *, intent: str | None = None, names: list[str] | None = None
    ) -> list[ReplySlot]:
        """``begin`` for several entries in a row, in one round trip (a streamed reply's two entries, taken
        together when nothing of it was shown before it was complete). ``intent``: the text of the first message
        about to be posted, recorded with the entries stored now (``ReplySlot.pending`` 0), as ``posted(...,
        done=False)`` would record it right after, so a post follows the store without another round trip.
        ``names``: the entries' own names (``begin_named``) instead of their places among the step's replies."""
        scope = self.scope
        if not scope.lease.still_held():
            raise LeaseLostError(f"lease on {scope.keys.cid} lost: reply not posted (another worker answers)")
        slots: list[ReplySlot] = []
        fields: list[str] = []
        for i, content in enumerate(contents):
            suffix = names[i] if names is not None else f"{scope.step}.{scope.replies}"
            fields.append(f"r{suffix}")
            slots.append(
                ReplySlot(
                    key=f"{scope.keys.cid}#{scope.batch_id}:{suffix}",
                    output_type=output_type,
                    content=content,
                    pending=None if intent is None else 0,
                    pending_text=intent or "",
                    fresh=True,
                )
            )
            if names is None:
                scope.replies += 1
        b = scope.backend
        args: list[str | int] = [scope.lease.fence, scope.take, f"m{scope.step}", "".join(scope.text), len(slots)]
        for name, slot in zip(fields, slots, strict=True):
            args.extend((name, slot.dump()))
        marks = dict(scope.marks)
        args.extend(item for pair in marks.items() for item in pair)
        try:
            result = await b.call(
                b.begin_reply,
                [scope.keys.lease, scope.ledger_key, scope.keys.batch],
                args,
                what=f"storing a reply for {scope.keys.cid}",
                retry_for=max(0.0, scope.lease.deadline - time.monotonic()),
                confirm=True,
            )
        except DispatchError as exc:
            # Not stored in time (Redis away, or replicas behind, until the lease's deadline): the context is given
            # up, so the batch is not acknowledged and runs again whole. Raised as a failed output only, the run
            # went on and asked the model again, whose answer (the messages already taken as answered) was
            # acknowledged: the reply was never shown (tests/fleet/test_e2e_failover.py, a second failover).
            scope.lease.give_up()
            raise LeaseLostError(f"reply for {scope.keys.cid} not stored in time, context given up: {exc}") from exc
        for name, value in marks.items():
            if scope.marks.get(name) == value:
                del scope.marks[name]
        if result[0] == "stale":
            scope.lease.give_up()  # the run is cancelled: it must not go on (asking the model again) to an ack
            raise LeaseLostError(f"lease on {scope.keys.cid} lost: reply not posted (another worker answers)")
        return [
            ReplySlot.load(slot.key, stored) if stored else slot for slot, stored in zip(slots, result[1:], strict=True)
        ]

    async def posted(self, slot: ReplySlot, message_id: str | None = None, *, done: bool = True) -> None:
        """Record the slot as it is now (a posted part's id, the intent to post one, completion), written
        at once: a crash right after a post should find the post recorded. Not fenced: a mark records a
        fact, even from a worker that lost its lease meanwhile, as long as the batch is still this take."""
        if message_id is not None:
            slot.message_ids.append(str(message_id))
        slot.done = done
        await self.record(slot)

    def mark(self, *slots: ReplySlot) -> None:
        """Record the ``slots`` as they are now with this run's next round trip to Redis (the next reply, the
        next model call, the acknowledgement), or on their own ``MARK_DELAY`` seconds later: for a platform
        whose posts carry an idempotency key (Discord's nonce), where a post found unrecorded after a crash is
        posted again harmlessly."""
        for slot in slots:
            self.scope.mark("r" + slot.key.rsplit(":", 1)[1], slot.dump())

    async def record(self, *slots: ReplySlot) -> None:
        """Write the ``slots`` as they are now, in one round trip (see ``posted``)."""
        scope = self.scope
        for slot in slots[:-1]:
            scope.marks["r" + slot.key.rsplit(":", 1)[1]] = slot.dump()
        if slots:
            await scope.record("r" + slots[-1].key.rsplit(":", 1)[1], slots[-1].dump())


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
            async with closing_stream(self.inner.stream(request)) as inner:
                async for chunk in inner:
                    yield chunk
            return
        try:
            await scope.flush_marks()  # before the (slow) model call, never after it
        except DispatchError:
            scope.lease.give_up()  # a failed model call ends the run as answered: the batch must not be acknowledged
            raise
        if scope.step == 0 or request.metadata.get("restarted") != "1":
            scope.step += 1  # (a call started again with inputs that joined before a word was shown keeps its step:
            # the call cancelled stored nothing, and the batch run again in its parts finds this answer at the step
            # of the part before the join. Numbered on, it stood at the next part's step: the part before, finding
            # nothing at its own, was answered again after it, tests/fleet/test_joined_in_order.py)
        scope.replies = 0
        scope.text = []
        stored = scope.cache.get(f"m{scope.step}")
        if stored is not None:
            replay = _replayable(stored, scope.cache.get(f"m{scope.step}:done") == "1")
            if replay:
                scope.replayed_inputs.update(scope.cache.get(f"m{scope.step}:in", "").split())
                scope.text.append(replay)
                yield replay
                return
        read = request.metadata.get("inputs", "")
        if read:  # the inputs this step reads, recorded with its first reply (or the next call): a batch run again
            # in the parts inputs joined it in knows a part this step answered with the part before it
            scope.marks[f"m{scope.step}:in"] = read
        async with closing_stream(self.inner.stream(request)) as inner:  # closed at once if this stream is closed
            async for chunk in inner:
                scope.text.append(chunk)
                yield chunk
        text = "".join(scope.text)
        if "<action_call" in text and scope.lease.valid:
            b = scope.backend
            try:
                await b.call(
                    b.store_model,
                    [scope.keys.lease, scope.ledger_key, scope.keys.batch],
                    [scope.lease.fence, scope.take, f"m{scope.step}", text],
                    what=f"storing a model answer for {scope.keys.cid}",
                    retry_for=max(0.0, scope.lease.deadline - time.monotonic()),
                )
            except DispatchError:
                scope.lease.give_up()  # (as above)
                raise
