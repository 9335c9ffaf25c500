"""Replies that appear as they are written: post when the first text arrives, update at most once per
interval, continue in a new message past the length limit, and always end on the exact final text.

Both chat adapters use this. A platform provides a ``MessageSink`` (post, edit and delete one message) and a
``split`` function (its length limit, measured the way it counts); ``LiveReplies`` turns the agent's run
events into one ``LiveReply`` per streamed output, and the output's handler finishes it with the final text.

Updates while streaming are best effort: a failed one (a 429 the client gave up on, a network error) is
skipped, since the next update or the final text carries everything. A request in flight is never cut
off: ``finish`` waits for it, so a message is never posted twice. The final text is always delivered: a
final edit that fails becomes a new message (and the stale ones are deleted when the platform allows).

In a queued run a reply has a ``ReplyRecord`` (``ledger.py``): nothing is shown before the reply is stored in
the run's ledger, every message posted is recorded, and a batch run again after a crash reuses the messages an
earlier attempt posted (edited to the final text) or, if that attempt delivered the reply, leaves it alone.
An answer that is not streamed is delivered the same way (a ``LiveReply`` finished at once), so the ledger is
followed in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.events import RunEvent, RunEventType

from .exactly_once import UNKNOWN_ID, ReplyRecord, Uncertain

__all__ = ("LiveReplies", "LiveReply", "MessageSink", "ReplyKey")

log = logging.getLogger("extensions.chat.stream")

_TEXT = (RunEventType.OUTPUT_TEXT, RunEventType.OUTPUT_TEXT_DONE)
"""The events of an output's text: its pieces, then the one that closes it."""

ReplyKey = tuple[str, int, int]
"""``(context id, step, output index)``: the run events and the ``OutputContext`` of one output share it."""


def _same(shown: str, text: str) -> bool:
    """Platforms trim a message's text: an edit that only changes whitespace at its ends changes nothing
    (Telegram refuses it with "message is not modified")."""
    return shown.strip() == text.strip()


class MessageSink(Protocol):
    """How a platform posts, edits and deletes the messages of one reply. Errors may be raised as they are."""

    async def post(self, text: str, *, index: int) -> Any:
        """Post message ``index`` of the reply (0: the first, a reply to the message being answered); return
        a handle for ``edit`` and ``delete``."""
        ...

    async def edit(self, handle: Any, text: str) -> None:
        """Replace the text of a posted message (only called when the text changed)."""
        ...

    async def delete(self, handle: Any) -> None:
        """Delete a posted message that the final text no longer needs."""
        ...


@dataclass(kw_only=True, eq=False)
class LiveReply:
    """One reply being streamed into one or more messages."""

    sink: MessageSink
    """Where messages go."""
    split: Callable[[str], list[str]]
    """Cuts a text into the messages the platform accepts (Telegram measures after rendering)."""
    interval: float = 1.5
    """At least this many seconds between two updates while streaming (the final text does not wait)."""
    preview: Callable[[str], Awaitable[None]] | None = None
    """Shows the message being written as a draft (Telegram's ``sendMessageDraft``) instead of posting and
    editing it; only messages that are already full are posted while streaming. Falls back to posting if
    a preview fails."""
    min_chars: int = 1
    """Nothing is shown before this many non-blank characters arrived."""
    split_in_thread: int = 4096
    """Texts longer than this are split in a worker thread (measuring a long text takes a while)."""
    record: ReplyRecord | None = None
    """The reply's entries in a queued run's ledger (None in the embedded mode)."""
    parse_handle: Callable[[str], Any] = int
    """A recorded message id back to the handle ``edit`` and ``delete`` take (for messages an earlier attempt
    at the batch posted)."""
    text: str = ""
    """The text received so far (the final text once finished)."""
    handles: list[Any] = field(default_factory=list)
    """Posted messages, in order."""
    shown: list[str] = field(default_factory=list)
    """What each posted message currently shows."""
    updates: int = 0
    """Posts, edits and previews made while streaming (for tests and metrics)."""
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    _last: float = field(default=float("-inf"), init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)
    _flushing: bool = field(default=False, init=False, repr=False)
    _requests: int = field(default=0, init=False, repr=False)

    # -- streaming -------------------------------------------------------------------------------------

    def feed(self, delta: str) -> None:
        """More text arrived; an update is scheduled (never more than one per ``interval``)."""
        if self._closed or not delta:
            return
        self.text += delta
        if self._task is None:
            self._task = asyncio.create_task(self._flusher(), name="live-reply")
        self._wake.set()

    async def _flusher(self) -> None:
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()
            wait = self._last + self.interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._flushing = True
            requests = self._requests
            try:
                await self._flush()
            finally:
                self._flushing = False
                if self._requests != requests:  # the interval runs from the last request, made or failed
                    self._last = time.monotonic()

    async def _split(self, text: str) -> list[str]:
        if len(text) > self.split_in_thread:
            return await asyncio.to_thread(self.split, text)
        return self.split(text)

    async def _flush(self) -> None:
        text = self.text
        if len(text.strip()) < self.min_chars:
            return
        chunks = await self._split(text)
        if not chunks:
            return
        if self.record is not None:
            if not self.record.opened:
                try:
                    first = chunks[0] if not self.handles and (self.preview is None or len(chunks) > 1) else None
                    await self.record.open(text, intent=first)  # stored before anything is shown
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.debug("live update skipped: the reply could not be recorded (%s)", exc)
                    return
                await self._adopt()
            if self.record.done:
                return  # delivered by an earlier attempt at the batch
        if self.preview is None:
            await self._sync_live(chunks)
            return
        if not await self._sync_live(chunks[:-1]):
            return
        try:
            self._check()
            self._requests += 1
            await self.preview(chunks[-1])
            self.updates += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("could not show a draft (%s); posting and editing the message instead", exc)
            self.preview = None
            self._wake.set()

    async def _sync_live(self, chunks: list[str]) -> bool:
        """Bring the posted messages up to ``chunks``; False when an update failed (the rest waits)."""
        for i, chunk in enumerate(chunks):
            try:
                if i < len(self.handles):
                    if self.handles[i] is None or _same(self.shown[i], chunk):
                        continue  # (a message taken as shown without its id cannot be edited)
                    self._check()
                    self._requests += 1
                    await self.sink.edit(self.handles[i], chunk)
                    self.shown[i] = chunk
                else:
                    self._requests += 1
                    await self._post(chunk)
                self.updates += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("live update skipped: %s", exc)
                return False
        return True

    def _check(self) -> None:
        """In a queued run: nothing more is shown once this worker no longer answers the batch."""
        if self.record is not None:
            self.record.check()

    async def _post(self, chunk: str, *, note: bool = True) -> None:
        """Post ``chunk`` as the next message; ``note=False``: the caller records it right after (the last
        message of ``finish``, recorded with the final text, in one write instead of two)."""
        self._check()
        await self._intend(len(self.handles), chunk)  # written before the request
        handle = await self.sink.post(chunk, index=len(self.handles))
        self.handles.append(handle)
        self.shown.append(chunk)
        if self.record is not None and note:
            await self.record.note(self.handles, self.shown, text=self.text, done=False)

    async def _intend(self, index: int, chunk: str) -> None:
        """In a queued run: record that message ``index`` is about to be posted showing ``chunk``."""
        if self.record is not None:
            await self.record.intend(index, chunk)
            self._check()

    async def _adopt(self) -> None:
        """Take over the messages an earlier attempt at the batch posted for this reply (before posting any)."""
        record = self.record
        if record is None or self.handles or not (record.message_ids or record.pending is not None):
            return
        self.handles = [None if i == UNKNOWN_ID else self.parse_handle(i) for i in record.message_ids]
        # What a message with an id shows is not taken from the record: the crash may have cut an edit off, and
        # editing it again is harmless (an edit to the same text is no error). Only a message taken as shown
        # without its id, which cannot be edited, keeps the text recorded for it.
        shown = record.shown
        if len(shown) != len(self.handles):  # (recorded before the texts were recorded one by one)
            shown = await self._split(record.content) if record.content.strip() else []
        self.shown = [shown[i] if handle is None and i < len(shown) else "" for i, handle in enumerate(self.handles)]
        if record.resolve_uncertain() is Uncertain.SKIP:  # the post in doubt is taken as shown, id unknown
            self.handles.append(None)
            self.shown.append(record.pending_text)

    async def _stop(self) -> None:
        """Stop streaming; an update in flight is finished first (cutting it off could post twice)."""
        self._closed = True
        task, self._task = self._task, None
        if task is None:
            return
        if not self._flushing:
            task.cancel()  # it waits for text or for the interval: nothing is in flight
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not task.cancelled() and task.exception() is not None:
            log.error("a live reply's updates failed", exc_info=task.exception())

    # -- ending ----------------------------------------------------------------------------------------

    async def finish(self, final_text: str) -> list[Any]:
        """Stop streaming and make the messages show exactly ``final_text``; return the message handles.
        Raises what the sink raised when the final text could not be posted at all (or the ledger's error
        when this worker no longer answers the batch)."""
        await self._stop()
        self.text = final_text
        chunks = await self._split(final_text)
        if self.record is not None:
            await self.record.close(final_text, intent=chunks[0] if chunks and not self.handles else None)
            await self._adopt()
            if self.record.done:
                return list(self.handles)
        for i, chunk in enumerate(chunks):
            if i >= len(self.handles):
                await self._post(chunk, note=i < len(chunks) - 1)  # the last one: the final note records it
                continue
            if _same(self.shown[i], chunk):
                continue
            if self.handles[i] is None:  # taken as shown (id unknown) and not final: the final text follows it
                self._check()
                await self._intend(i, chunk)
                self.handles[i] = await self.sink.post(chunk, index=i)
                self.shown[i] = chunk
                continue
            self._check()
            try:
                await self.sink.edit(self.handles[i], chunk)
                self.shown[i] = chunk
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("the final edit of a streamed reply failed (%s); posting the rest as new messages", exc)
                stale = self.handles[i:]
                del self.handles[i:], self.shown[i:]
                for rest in chunks[i:]:
                    await self._post(rest)
                await self._delete(stale)
                break
        if len(self.handles) > len(chunks):  # the final text is shorter than what was streamed
            stale = self.handles[len(chunks) :]
            del self.handles[len(chunks) :], self.shown[len(chunks) :]
            await self._delete(stale)
        if self.record is not None:
            await self.record.note(self.handles, self.shown, text=final_text, done=True)
        return list(self.handles)

    async def abandon(self, note: str = " …") -> None:
        """The reply will never be finished (the run failed): leave what was shown, marked as cut."""
        await self._stop()
        if self.handles and self.handles[-1] is not None and not (self.record is not None and self.record.done):
            with contextlib.suppress(Exception):
                self._check()
                await self.sink.edit(self.handles[-1], self.shown[-1] + note)

    async def silence(self) -> None:
        """Stop streaming and touch nothing shown (another attempt at the batch took the reply's messages over)."""
        await self._stop()

    async def discard(self) -> None:
        """The output was not delivered this way (refused, or its handler posted otherwise): delete what was
        shown of it."""
        await self._stop()
        if self.record is not None and self.record.done:
            return  # an earlier attempt at the batch delivered it
        stale, self.handles, self.shown = self.handles, [], []
        await self._delete(stale)
        if stale and self.record is not None:
            await self.record.note([], [], text="", done=False)

    async def _delete(self, handles: list[Any]) -> None:
        for handle in handles:
            if handle is None:
                continue
            try:
                self._check()
                await self.sink.delete(handle)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("could not delete a message of a streamed reply: %s", exc)


def _left_over(reply: LiveReply | None) -> bool:
    """Whether ``reply`` belongs to a run that can no longer show it: its ledger's lease is lost (the run was cancelled
    and a later run of the context starts its outputs under the same keys)."""
    return reply is not None and reply.record is not None and not reply.record.ledger.valid


class LiveReplies:
    """The live replies of one adapter: run events start and feed them, output handlers ``take`` and finish them.

    ``start(event)`` builds the reply for the first text of an output of ``output_type`` (None: do not
    stream that one). Register ``on_event`` with ``agent.add_event_listener``.
    """

    def __init__(self, *, output_type: str, start: Callable[[RunEvent], LiveReply | None]) -> None:
        self.output_type = output_type
        """The output whose text is streamed (``telegram:message``)."""
        self._start = start
        self._replies: dict[ReplyKey, LiveReply | None] = {}
        self._cleanup: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return sum(1 for reply in self._replies.values() if reply is not None)

    def on_event(self, event: RunEvent) -> None:
        """The agent's event listener (called synchronously by the run: it never raises)."""
        if event.type not in _TEXT or event.output_index is None:
            return
        key = (event.context_id, event.step, event.output_index)
        try:
            if event.final:  # after the handler: a reply still here was never finished by it
                reply = self._replies.pop(key, None)
                if reply is not None:
                    self._spawn(reply.discard())
                return
            if event.output_type != self.output_type or not isinstance(event.content, str):
                return
            if key not in self._replies:
                self._sweep()
                self._replies[key] = self._start(event)
            elif event.new_item:
                self._restart(key, event)
            reply = self._replies[key]
            if reply is not None:
                reply.feed(event.content)
        except Exception:
            log.exception("live reply of %s failed; the answer is posted when complete", event.context_id)
            self._replies[key] = None

    def take(self, key: ReplyKey, ledger: object = None) -> LiveReply | None:
        """The live reply of the output ``key`` (its handler finishes it), if its text was streamed. With the run's
        ``ledger`` (a queued run), a reply recorded in another one is not returned: it was left by an earlier run of
        the context in this process, cancelled before it finished it (its worker lost the lease), and the next run
        starts at the same ``(context, step, index)``; finishing it failed this run's output with the earlier run's
        "lease lost: reply not posted", and the batch was acknowledged unanswered (issue 28)."""
        reply = self._replies.pop(key, None)
        if reply is not None and ledger is not None and reply.record is not None and reply.record.ledger is not ledger:
            self._drop(reply)
            return None
        return reply

    def get(self, key: ReplyKey) -> LiveReply | None:
        """The live reply under ``key``, if one is streaming."""
        return self._replies.get(key)

    async def abandon_context(self, context_id: str) -> None:
        """A run of ``context_id`` ended without finishing some replies: mark them cut."""
        for key in [k for k in self._replies if k[0] == context_id]:
            reply = self._replies.pop(key)
            if reply is not None:
                await reply.abandon()

    async def aclose(self) -> None:
        """Abandon what is still streaming and wait for the clean-ups (the adapter is stopping)."""
        replies = [r for r in self._replies.values() if r is not None]
        self._replies.clear()
        for reply in replies:
            await reply.abandon()
        while self._cleanup:
            await asyncio.wait(set(self._cleanup))

    def _restart(self, key: ReplyKey, event: RunEvent) -> None:
        """An output begins under the key of a reply still kept: a run cancelled before it finished that reply left
        it (no final event came), and this run starts from the same ``(context, step, index)``. It is this run's
        only when both follow the same ledger. One whose lease is lost is dropped (``_drop``). One recorded in
        another ledger still held (the batch run again in this process under a new take while the lease of the
        cancelled attempt had not run out) is stopped without a word: this run's reply adopts its messages from
        the ledger, and the two edited the same message, one appending this answer to the other's text
        (tests/fleet/test_joined_in_order.py: "echo: oneecho: one …")."""
        old = self._replies[key]
        if _left_over(old):
            self._sweep()
            self._replies[key] = self._start(event)
            return
        if old is None or old.record is None:
            return  # (the embedded mode: a run is cancelled from outside only when the agent stops)
        fresh = self._start(event)
        if fresh is not None and fresh.record is not None and fresh.record.ledger is not old.record.ledger:
            self._replies[key] = fresh
            self._spawn(old.silence())

    def _sweep(self) -> None:
        """Drop the replies left by runs cancelled before they finished them (their lease is lost): none of them
        will be taken, and a context that does not speak again in this process would keep them for good."""
        for key in [key for key, reply in self._replies.items() if _left_over(reply)]:
            self._drop(self._replies.pop(key))

    def _drop(self, reply: LiveReply | None) -> None:
        """Forget a reply left by a run that ended without finishing it (marked cut where it may still show)."""
        if reply is not None:
            self._spawn(reply.abandon())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro, name="live-reply-cleanup")
        self._cleanup.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._cleanup.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cleaning up a live reply failed", exc_info=task.exception())
