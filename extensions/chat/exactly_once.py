"""Replies posted exactly once when a queue runs the conversation, written once for both chat adapters.

A queued run (``core.fleet``) offers a reply ledger in ``state.ledger``: a reply is stored,
keyed by the batch it answers, before anything of it is shown, and each message posted for it is recorded.
A batch run again after a crash finds what the earlier attempt did: a reply that was delivered is skipped,
messages that were posted are reused (edited to the final text) instead of posted again, and the model's
answer is replayed instead of asked for again. ``ReplyRecord`` is that protocol for one reply; ``LiveReply``
(``stream.py``) follows it whenever it has a record, so both the streamed and the posted-at-once delivery of
both adapters go through it. Outside a queued run (the embedded mode) there is no ledger and no record.

A streamed reply takes two ledger entries: the first (``open``) before its first message is shown, where its
messages are recorded while it is written, so a crash in the middle leaves them to the next attempt; the
second (``close``) when the answer is complete, which also stores the model's answer up to the end of this
reply, so a retried batch replays it. A reply posted at once takes only the second. Every attempt at a batch
takes the same entries in the same order (the ledger numbers them), given the same settings.

On Discord each message also carries a nonce derived from the entry's stable key (with ``enforce_nonce``),
which closes the one window the ledger leaves: a crash after a post and before its record was written.
Telegram has no such key, so there the record also writes the intent to post a message before the request
(``intend``), and its id the moment the answer arrives: after a crash, a post whose intent is recorded and
whose answer is not is the one case left uncertain (it may or may not be shown). ``Uncertain`` says what to
do then: post it again (a possible duplicate) or take it as shown (a possible gap).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from core.errors import DispatchError

if TYPE_CHECKING:
    from core.definitions import ContextState
    from core.reply_ledger import ReplyLedger, ReplySlot

__all__ = ("UNKNOWN_ID", "ReplyRecord", "Uncertain", "may_post", "post_once")

log = logging.getLogger("extensions.chat")

UNKNOWN_ID = "?"
"""The recorded id of a message taken as shown without its id (``Uncertain.SKIP``): never edited or deleted."""


class Uncertain(enum.StrEnum):
    """What a retried batch does with a post an earlier attempt sent and died before hearing back about
    (``TELEGRAM_UNCERTAIN_REPLIES``)."""

    RESEND = "resend"
    """Post it again: nothing is lost; if the first request did reach the platform, it is shown twice."""
    SKIP = "skip"
    """Take it as shown: nothing is shown twice; if the first request never reached the platform, that
    message is missing. (A post that showed only the first words of an answer being streamed is not left
    as the answer: the final text is posted after it, since that post cannot be edited without its id.)"""


def may_post(state: ContextState) -> bool:
    """Whether a run may still write to its conversation: always in the embedded mode; in a queued run only
    while the worker holds the conversation (a worker whose lease is lost leaves notices to the one that took
    the conversation over). For what does not go through a ``ReplyRecord``, such as a failure notice."""
    ledger: ReplyLedger | None = state.ledger
    return ledger is None or ledger.valid


async def post_once(state: ContextState, what: str, text: str, post: Callable[[], Awaitable[Sequence[Any]]]) -> bool:
    """Post something that is not an answer (the quote of a voice message) at most once per batch, for
    platforms without an idempotency key (Telegram). In a queued run it takes a ledger entry as a reply does:
    a batch run again after a crash finds it posted, or in doubt (its intent recorded, its outcome not), and
    posts nothing, since a notice shown twice is worse than one missing. ``post`` returns the posted messages'
    ids. Returns whether it posted. Raises what ``post`` raises, and the ledger's ``DispatchError`` once this
    worker no longer answers the batch."""
    ledger: ReplyLedger | None = state.ledger
    if ledger is None:
        await post()
        return True
    slot = await ledger.begin(what, text)
    if slot.done or slot.pending is not None:
        log.info("%s %s was posted (or tried) by an earlier attempt: not posted again", what, slot.key)
        return False
    slot.pending, slot.pending_text = 0, text
    await ledger.posted(slot, None, done=False)
    ids = await post()
    slot.pending = None
    slot.message_ids = [str(i) for i in ids]
    await ledger.posted(slot, None, done=True)
    return True


class ReplyRecord:
    """One reply's entries in the ledger of the batch being answered."""

    def __init__(
        self,
        ledger: ReplyLedger,
        output_type: str,
        *,
        streamed: bool,
        uncertain: Uncertain | None = None,
        on_uncertain: Callable[[Uncertain], None] | None = None,
    ) -> None:
        self.ledger = ledger
        """The run's ledger."""
        self.output_type = output_type
        """The output being delivered (``discord:message``)."""
        self.streamed = streamed
        """The adapter streams replies: the reply takes an entry before it is shown (``open``)."""
        self.done = False
        """An attempt (this one or an earlier one) delivered the whole reply: show nothing more."""
        self.message_ids: list[str] = []
        """The platform ids of the reply's messages, as last recorded (an earlier attempt's, once begun)."""
        self.content = ""
        """The text those messages were recorded with."""
        self.shown: list[str] = []
        """What each of those messages showed when it was last recorded (an edit after that is not recorded)."""
        self.uncertain = uncertain
        """Record the intent before each post and resolve an uncertain one this way (None: the platform
        dedupes posts itself, as Discord does with the nonce: no intent is recorded)."""
        self.on_uncertain = on_uncertain
        """Told each time an uncertain post is resolved (for the metrics)."""
        self.pending: int | None = None
        """The message an earlier attempt sent a post for and did not hear back about (its index), until
        ``resolve_uncertain`` takes it."""
        self.pending_text = ""
        """The text that post carried."""
        self._live: ReplySlot | None = None
        self._final: ReplySlot | None = None
        self._posts = 0
        self._intended: tuple[int, str] | None = None
        self._delivered: str | None = None  # the text an earlier attempt recorded delivering under these entries

    @classmethod
    def of(cls, state: ContextState, output_type: str, *, streamed: bool) -> ReplyRecord | None:
        """The record for a reply in the run of ``state``; None outside a queued run."""
        ledger = state.ledger
        return None if ledger is None else cls(ledger, output_type, streamed=streamed)

    @property
    def opened(self) -> bool:
        """The reply has its first entry (nothing may be shown before)."""
        return self._live is not None or self._final is not None

    async def open(self, text: str, *, intent: str | None = None) -> None:
        """Before anything of a streamed reply is shown: take (or find) its first entry. Raises the ledger's
        ``DispatchError`` (``LeaseLostError``) when this worker no longer answers the batch: show nothing.
        ``intent``: the text of the first message, posted next (its intent is stored with the entry)."""
        if self.opened:
            return
        if not self.streamed:
            await self.close(text, intent=intent)
            return
        (self._live,) = await self._begin([text], intent)
        self._absorb(self._live)

    async def close(self, text: str, *, intent: str | None = None) -> None:
        """The answer is complete: take (or find) its last entry, storing ``text`` with it (with the first one, in
        the same round trip, when the reply has none yet). ``intent``: as for ``open``, when nothing is shown yet."""
        if self._final is None:
            if self.streamed and self._live is None:
                self._live, self._final = await self._begin([text, text], intent)
                self._absorb(self._live)
            else:
                (self._final,) = await self._begin([text], intent if not self.opened else None)
            self._absorb(self._final)
        self._same_answer(text)

    def _same_answer(self, text: str) -> None:
        """A reply an earlier attempt delivered under this reply's entries stands for this one only when it is the same
        answer. The entries are keyed by their place in the batch's run (``<batch>:<step>.<n>``), and a batch whose
        inputs changed across attempts (a Redis failover lost a join, or the take of a batch that was then taken again
        under the same id, with the inputs stored meanwhile) has a step whose model call is not replayed and answers
        other inputs than the earlier attempt's at the same place: taken as delivered, that answer was recorded in the
        memory as given and never shown (tests/fleet/test_e2e_primary_back.py). Its messages are edited to this
        answer instead. Since each take of a batch has a token the ledger's scripts check (``core.fleet.scripts``), a
        lost take's records no longer reach another take's ledger; this stays as a safety net (a ledger an older
        worker wrote during a rolling upgrade carries no token)."""
        delivered, self._delivered = self._delivered, None
        if not self.done or delivered is None or delivered == text:
            return
        self.done = False
        slot = self._final or self._live
        log.warning(
            "reply %s was delivered by an earlier attempt with another answer (the batch's inputs changed since): "
            "its %d message(s) are edited to this one",
            slot.key if slot is not None else "?",
            len(self.message_ids),
        )

    async def _begin(self, texts: list[str], intent: str | None) -> list[ReplySlot]:
        """Take the entries for ``texts`` in one round trip when the ledger can (``begin_many``), recording the
        intent to post the first message (``intent``) with them on a platform that needs it (``uncertain``)."""
        many = getattr(self.ledger, "begin_many", None)
        if many is None:
            return [await self.ledger.begin(self.output_type, text) for text in texts]
        intent = intent if self.uncertain is not None else None
        slots: list[ReplySlot] = await many(self.output_type, texts, intent=intent)
        if intent is not None and all(slot.fresh for slot in slots):
            self._intended = (0, intent)
        return slots

    async def _record(self, slots: list[ReplySlot]) -> None:
        """Write ``slots`` as they are now: in one round trip when the ledger can (``record``). On a platform that
        dedupes posts itself (``uncertain`` None: Discord's nonce), the write travels with the run's next round
        trip to Redis when the ledger can (``mark``): a post it misses after a crash is posted again with the same
        nonce, which the platform answers with the message already posted."""
        if self.uncertain is None:
            later = getattr(self.ledger, "mark", None)
            if later is not None:
                later(*slots)
                return
        many = getattr(self.ledger, "record", None)
        if many is not None:
            await many(*slots)
            return
        for slot in slots:
            await self.ledger.posted(slot, None, done=slot.done)

    def _absorb(self, slot: ReplySlot) -> None:
        """Take over what an earlier attempt recorded in ``slot``."""
        if slot.fresh or not (slot.done or slot.message_ids or slot.uncertain):
            return
        if slot.uncertain and not slot.done and self.uncertain is not None:
            self.pending = slot.pending
            self.pending_text = slot.pending_text
        self.done = self.done or slot.done
        if slot.done:
            self._delivered = slot.content
        self.message_ids = list(slot.message_ids)
        self.content = slot.content
        self.shown = list(slot.shown)
        self._posts = max(self._posts, len(self.message_ids))
        log.info(
            "reply %s was %s by an earlier attempt (%d messages)",
            slot.key,
            "delivered" if slot.done else "begun",
            len(slot.message_ids),
        )

    def resolve_uncertain(self) -> Uncertain | None:
        """Once: how to treat the post an earlier attempt left uncertain (None if there is none)."""
        if self.pending is None or self.done or self.uncertain is None:
            return None
        self.pending = None
        if self.on_uncertain is not None:
            self.on_uncertain(self.uncertain)
        log.warning(
            "an earlier attempt sent a post for a reply and died before it heard back: %s",
            "posting it again (it may be shown twice)" if self.uncertain is Uncertain.RESEND else "taking it as shown",
        )
        return self.uncertain

    async def intend(self, index: int, text: str) -> None:
        """Before posting message ``index`` of the reply (showing ``text``): record the intent (written at
        once), so a crash before the answer is recorded leaves the post marked uncertain rather than unsent. An
        intent stored with the entries (``open``/``close`` with ``intent``) is not written again."""
        if self.uncertain is None:
            return
        if self._intended == (index, text):
            self._intended = None
            return
        self._intended = None
        slots = [slot for slot in (self._live, self._final) if slot is not None]
        for slot in slots:
            slot.pending = index
            slot.pending_text = text
            slot.done = False
        await self._record(slots)

    def check(self) -> None:
        """Before each post, edit or delete: raise ``DispatchError`` once this worker may no longer show
        anything for the batch (its lease is lost or may have expired; the worker that took the conversation
        over answers it). Beginning an entry is checked by the ledger itself, in Redis."""
        if not self.ledger.valid:
            raise DispatchError(
                "this worker no longer answers the conversation (its lease was lost or may have expired): "
                "the reply is left to the worker that took it over"
            )

    def next_key(self) -> str:
        """A key for the next message posted, the same in every attempt at the batch (Discord's nonce)."""
        slot = self._live or self._final
        if slot is None:
            raise RuntimeError("ReplyRecord.next_key() before open() or close(): nothing may be posted yet")
        key = slot.part_nonce(self._posts)
        self._posts += 1
        return key

    async def note(self, handles: Sequence[Any], shown: Sequence[str], *, text: str, done: bool) -> None:
        """Record the reply's messages as they are now: their handles, what each shows, and the text received
        so far (``done``: the final text is shown in all of them)."""
        self.message_ids = [UNKNOWN_ID if h is None else str(h) for h in handles]
        self.shown = list(shown)
        self.content = text
        self.done = done
        slots = [slot for slot in (self._live, self._final) if slot is not None]
        for slot in slots:
            slot.pending = None
            slot.message_ids = list(self.message_ids)
            slot.shown = list(self.shown)
            slot.content = text
            slot.done = done
        await self._record(slots)
