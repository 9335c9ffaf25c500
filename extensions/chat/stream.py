"""Replies that appear as they are written: post when the first text arrives, edit at most once per
interval, continue in a new message past the length limit, and always end on the exact final text.

Both chat adapters use this through a ``MessageSink`` (post and edit one message). Edits while streaming are
best effort: a failed one (a 429, a network error) is skipped, since the next edit or the final text
carries everything. The final text is always delivered: an edit that fails at the end becomes a new message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .split import split_message

__all__ = ("LiveReplies", "LiveReply", "MessageSink")

log = logging.getLogger("extensions.chat.stream")


class MessageSink(Protocol):
    """How a platform posts and edits a message of one reply."""

    async def post(self, text: str, *, first: bool) -> Any:
        """Post a new message; return a handle for ``edit``. ``first`` is true for the reply's first message."""
        ...

    async def edit(self, handle: Any, text: str) -> None:
        """Replace the text of a posted message."""
        ...


@dataclass(kw_only=True, eq=False)
class LiveReply:
    """One reply being streamed into one or more messages."""

    sink: MessageSink
    """Where messages go."""
    limit: int
    """The platform's message length limit."""
    measure: Callable[[str], int] = len
    """How the platform measures a message (Telegram: after rendering)."""
    interval: float = 1.5
    """At least this many seconds between two edits of the reply."""
    min_chars: int = 1
    """Do not post before this much text has arrived."""
    text: str = ""
    """The text received so far."""
    handles: list[Any] = field(default_factory=list)
    """Posted messages, in order."""
    shown: list[str] = field(default_factory=list)
    """What each posted message currently shows."""
    edits: int = 0
    """Posts and edits made while streaming (for tests and metrics)."""
    _task: asyncio.Task[None] | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _last: float = 0.0
    _closed: bool = False

    def feed(self, delta: str) -> None:
        """More text arrived; a flush is scheduled (never more than one per ``interval``)."""
        if self._closed or not delta:
            return
        self.text += delta
        if self._task is None:
            self._task = asyncio.create_task(self._flusher(), name="live-reply")
        self._wake.set()

    async def _flusher(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            wait = self._last + self.interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if len(self.text.strip()) >= self.min_chars:
                await self._sync(split_message(self.text, self.limit, measure=self.measure), final=False)
            self._last = time.monotonic()

    async def _sync(self, chunks: list[str], *, final: bool) -> None:
        for i, chunk in enumerate(chunks):
            if i < len(self.handles):
                if self.shown[i] == chunk:
                    continue
                try:
                    await self.sink.edit(self.handles[i], chunk)
                    self.shown[i] = chunk
                    self.edits += 1
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if not final:
                        log.debug("live edit skipped: %s", exc)
                        return
                    log.warning("final edit failed (%s); sending the text as a new message", exc)
                    await self._post(chunk, first=False)
            else:
                try:
                    await self._post(chunk, first=not self.handles)
                    self.edits += 0 if final else 1
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if final:
                        raise
                    log.debug("live post skipped: %s", exc)
                    return

    async def _post(self, chunk: str, *, first: bool) -> None:
        handle = await self.sink.post(chunk, first=first)
        self.handles.append(handle)
        self.shown.append(chunk)

    async def _stop(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def finish(self, final_text: str) -> list[Any]:
        """Stop streaming and make the messages show exactly ``final_text``; return the message handles."""
        await self._stop()
        chunks = split_message(final_text, self.limit, measure=self.measure)
        await self._sync(chunks, final=True)
        for i in range(len(chunks), len(self.handles)):  # the final text is shorter than what was streamed
            with contextlib.suppress(Exception):
                await self.sink.edit(self.handles[i], "…")
        return list(self.handles)

    async def abandon(self, note: str = " …") -> None:
        """The reply will never be finished (the run failed): leave what was shown, marked as cut."""
        await self._stop()
        if self.handles and self.shown:
            with contextlib.suppress(Exception):
                await self.sink.edit(self.handles[-1], self.shown[-1] + note)


class LiveReplies:
    """The live replies of one adapter, keyed by (context id, step, output index)."""

    def __init__(self) -> None:
        self._replies: dict[tuple[str, int, int], LiveReply] = {}

    def get(self, key: tuple[str, int, int]) -> LiveReply | None:
        """The live reply under ``key``, if one is streaming."""
        return self._replies.get(key)

    def start(self, key: tuple[str, int, int], reply: LiveReply) -> LiveReply:
        """Register a new live reply."""
        self._replies[key] = reply
        return reply

    def pop(self, key: tuple[str, int, int]) -> LiveReply | None:
        """Take the live reply under ``key`` out (its output handler finishes it)."""
        return self._replies.pop(key, None)

    async def abandon_context(self, context_id: str) -> None:
        """A run of ``context_id`` ended without finishing some replies: mark them cut."""
        for key in [k for k in self._replies if k[0] == context_id]:
            reply = self._replies.pop(key)
            await reply.abandon()
