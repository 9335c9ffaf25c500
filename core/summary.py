"""The rolling summary: what left the prompt's window, folded into a few sentences per conversation.

After a run has answered and saved, ``Summarizer.schedule`` starts (in a task it owns) a fold when at
least ``every`` history entries older than the newest ``keep`` ones are not in the summary yet: one
model call turns the old summary and those entries into the new summary. At most one fold runs per
conversation: in this process (a task per conversation) and across workers (a ``SummaryLock``, in Redis
when workers share); a fold that finds the lock taken looks again until a hold's expiry has passed, so a
killed worker's hold delays the summary by seconds, not until the next message. The write is conditional
on the summary not having moved meanwhile, so even an expired lock cannot lose a fold. A failed call
keeps the old summary; the next run tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from .entries import now_ms
from .errors import RunError
from .memory.history import HistoryEntry, HistoryStore, Summary
from .models.base import Model, ModelRequest, call_route, closing_stream
from .slots import Slot
from .usage import USAGE, day_of

if TYPE_CHECKING:
    from .definition_types import Setup

__all__ = ("SUMMARIZER", "LocalSummaryLock", "Summarizer", "SummaryLock", "SummaryPolicy", "summary_prompt")

log = logging.getLogger("core.summary")

SUMMARIZER: Slot[Summarizer] = Slot("summarizer")
"""Folds what leaves the prompt's window into each conversation's summary (the ``LongMemory`` plugin's, with a
summary policy: ``agent.provided(SUMMARIZER)``)."""

SUMMARY_SYSTEM = """\
You keep the running summary of a long chat conversation, so that it can be continued weeks later.
You get the summary so far and the next messages. Write the new summary: keep who is who, facts people
told about themselves, preferences, decisions, promises, open questions and dates; drop greetings and
small talk. Write plain sentences, no XML, no headings, at most {words} words. Answer with the summary only."""


@dataclass(frozen=True, kw_only=True)
class SummaryPolicy:
    """When and how conversations are summarized."""

    every: int = 50
    """Entries folded per model call (a fold starts once this many left the window)."""
    keep: int = 40
    """The newest entries, still in the prompt's window, are never folded."""
    max_chars: int = 2000
    """The summary is cut to this many characters."""
    timeout: float = 120.0
    """Seconds a summary call may take."""
    max_tokens: int = 600
    """Tokens the summary call may generate."""
    model: Model | None = None
    """The model that writes summaries (None: the agent's model)."""


class SummaryLock(Protocol):
    """Who may fold a conversation now."""

    ttl: float
    """Seconds one hold lasts at most (a killed holder's included): a fold that found the lock taken looks again
    until this long has passed, since whoever holds it after that took it after the entries it wanted folded."""

    def hold(self, cid: str) -> contextlib.AbstractAsyncContextManager[bool]:
        """Enter to try to hold ``cid``: yields True if this process holds it (until exit), else False."""
        ...


class LocalSummaryLock:
    """One fold per conversation in this process (enough when no other process folds)."""

    def __init__(self, *, ttl: float = 180.0) -> None:
        self.ttl = ttl
        """Seconds a fold here may hold a conversation (longer than a summary call may take)."""
        self._held: set[str] = set()

    @contextlib.asynccontextmanager
    async def hold(self, cid: str) -> AsyncIterator[bool]:
        """Yields True unless another fold of ``cid`` runs here."""
        if cid in self._held:
            yield False
            return
        self._held.add(cid)
        try:
            yield True
        finally:
            self._held.discard(cid)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def summary_prompt(old: str, entries: Sequence[HistoryEntry], *, words: int) -> ModelRequest:
    """The model call that folds ``entries`` into ``old``."""
    lines = "\n".join(f"[{_when(e.ts)}] {e.who}: {' '.join(e.text.split())}" for e in entries)
    prompt = f"Summary so far:\n{old or '(none yet)'}\n\nNext messages:\n{lines}\n\nThe new summary:"
    return ModelRequest(
        system=SUMMARY_SYSTEM.format(words=words),
        prompt=prompt,
        max_tokens=max(64, words * 2),
        stop=(),
        metadata={"purpose": "summary"},
    )


_TAG = re.compile(r"<[^>]*>")
_OUTPUT = re.compile(r"<output\b[^>]*>(.*?)</output>", re.DOTALL)


def _clean(text: str, *, limit: int) -> str:
    """The summary a model wrote, without any protocol tags it added out of habit, cut to ``limit``."""
    found = _OUTPUT.search(text)
    if found:
        text = found.group(1)
    text = " ".join(_TAG.sub(" ", text).split())
    if len(text) > limit:
        text = text[: limit - 1].rsplit(" ", 1)[0] + "…"
    return text


class Summarizer:
    """Folds history into summaries in the background, owned by the agent (stopped with it)."""

    def __init__(
        self, agent: Setup, history: HistoryStore, policy: SummaryPolicy, *, lock: SummaryLock | None = None
    ) -> None:
        self.agent = agent
        """Whose model writes the summaries (unless the policy names one)."""
        self.history = history
        """Where the entries and summaries are."""
        self.policy = policy
        """When and how."""
        self.lock: SummaryLock = lock if lock is not None else LocalSummaryLock()
        """Who may fold a conversation now."""
        self.folds = 0
        """Folds written by this process."""
        self.failures = 0
        """Summary calls that failed (the old summary was kept)."""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    def schedule(self, cid: str) -> None:
        """Catch ``cid``'s summary up in the background, unless that is already going on here."""
        if self.policy.every <= 0:
            return
        running = self._tasks.get(cid)
        if running is not None and not running.done():
            self._again.add(cid)  # it looks once more before it ends
            return
        task = asyncio.get_running_loop().create_task(self._catch_up(cid), name=f"summary:{cid}")
        self._tasks[cid] = task
        task.add_done_callback(lambda t: self._tasks.pop(cid, None) if self._tasks.get(cid) is t else None)

    async def idle(self) -> None:
        """Wait until no fold runs here (tests, benchmarks)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks.values()))

    def cancel(self, cid: str) -> None:
        """Stop a fold of ``cid`` going on here (``/forget``)."""
        task = self._tasks.pop(cid, None)
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        """Cancel the folds going on (they are done again after the next run: nothing is lost)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _catch_up(self, cid: str) -> None:
        try:
            while True:
                self._again.discard(cid)
                await self._fold_due(cid)
                if cid not in self._again:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failures += 1
            log.warning("summary of %s not updated (kept the old one; tried again after the next run): %s", cid, exc)

    async def _fold_due(self, cid: str) -> None:
        """Fold ``cid``'s due batches, one hold of the lock each, until none is due or another process has held
        the lock for as long as a hold may last.

        The lock taken may be a fold that read the history before this run's entries were stored, then ended, or
        a killed worker's, that only expires: looking again, less and less often, keeps those entries from
        waiting for the conversation's next message. Once ``ttl`` has passed, whoever holds it took it after
        they were stored, and folds them itself."""
        loop = asyncio.get_running_loop()
        give_up: float | None = None  # set when the lock is first found taken
        pause = 0.05
        while True:
            async with self.lock.hold(cid) as held:
                if held:
                    if not await self.fold(cid):
                        return
                    give_up, pause = None, 0.05
                    continue
            now = loop.time()
            if give_up is None:
                give_up = now + self.lock.ttl
            if now >= give_up:
                return
            await asyncio.sleep(min(pause, give_up - now))
            pause = min(pause * 2, 5.0)

    async def _charge(self, cid: str, model: Model, request: ModelRequest, answer: str) -> None:
        """Count a fold's tokens in the conversation's (and the model's) usage, as a run's calls are counted: the
        per-conversation token limit sees them (estimated, about 4 characters a token; a failing store is logged)."""
        route = call_route.get()  # a chain of models says which of them answered
        name = route.answered if route is not None and route.answered else model.model or model.name
        usage = self.agent.provided(USAGE)  # (the Usage plugin's store; without it nothing counts tokens)
        if usage is None:
            return
        try:
            await usage.add(
                day=day_of(),
                keys=[f"chat:{cid}", f"model:{name}"],
                input_tokens=(len(request.system) + len(request.prompt)) // 4,
                output_tokens=len(answer) // 4,
                cost=0,
            )
        except Exception as exc:
            log.warning("the usage of a summary of %s was not counted: %s", cid, exc)

    async def fold(self, cid: str) -> bool:
        """Fold the next batch of ``cid`` if one is due; True if a new summary was written. Raises when
        the model or the store fails (the old summary stays)."""
        policy = self.policy
        current = await self.history.summary(cid)
        entries = await self.history.pending(cid, after=current.upto, keep=policy.keep, limit=policy.every)
        if not entries:
            return False
        model = policy.model or self.agent.model
        request = summary_prompt(current.text, entries, words=max(30, policy.max_chars // 7))
        request.metadata["context_id"] = cid
        call_route.set(None)
        async with asyncio.timeout(policy.timeout):
            async with closing_stream(model.stream(request)) as stream:
                chunks = [chunk async for chunk in stream]
        raw = "".join(chunks)
        await self._charge(cid, model, request, raw)
        text = _clean(raw, limit=policy.max_chars)
        if not text:
            raise RunError(f"the summary model {model.name!r} answered nothing")
        new = Summary(text=text, upto=entries[-1].seq, updated=now_ms())
        if not await self.history.set_summary(cid, new, expected=current.upto):
            return False  # another process folded meanwhile
        self.folds += 1
        return True
