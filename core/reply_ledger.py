"""The reply ledger a queued run gives its output handlers (``ContextState.ledger``): each reply is keyed by the
batch it answers, stored before it is posted and marked when posted, so a batch run again (a worker died) never
posts twice. ``core.fleet.RedisReplyLedger`` is the one a worker uses; in one process a run has none.

An output handler follows this protocol::

    ledger = ctx.state.ledger                         # None outside a queued run
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
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .slots import Slot

__all__ = ("BATCH", "ReplyLedger", "ReplySlot")

BATCH: Slot[str] = Slot("queued batch")
"""Kept in ``ContextState.values`` by a queued run: the id of the batch it answers, the same in every attempt at
it (``Agent.run(batch=...)``), which a charge and a history entry are keyed by so a batch run again counts and
keeps nothing twice; none in one process."""


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
    fresh: bool = False
    """Stored by this attempt just now (not found stored by an earlier one); not stored itself."""

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
