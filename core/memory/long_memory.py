"""The long-memory plugin: every input and output of a conversation kept in a history store (searchable beyond
the prompt's window, ``search_history``), and what leaves the window folded into the conversation's summary
(``core.summary``), shown to the model with its state."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..errors import RunError
from ..escape import escape_text
from ..plugin import Plugin
from ..prompt_sections import PromptSection, show
from ..recent import Recent
from ..summary import SUMMARIZER, Summarizer, SummaryLock, SummaryPolicy
from .history import HISTORY, HistoryStore, Summary
from .recording import history_entries, history_id

if TYPE_CHECKING:
    from ..definition_types import ContextState, Setup
    from ..entries import InputRef, Log

__all__ = ("LongMemory",)

log = logging.getLogger("core.memory")

SUMMARIES_KEPT = 1024
"""Conversations whose summary stays loaded between runs, at most (the most recently read)."""


class LongMemory(Plugin):
    """Keeps every input and output in ``history``; with ``summary`` (and ``every`` above 0), folds what leaves the
    prompt's window into each conversation's summary after its runs (``lock``: who may fold now, when several
    processes share the history)."""

    name = "long-memory"

    def __init__(
        self, history: HistoryStore, *, summary: SummaryPolicy | None = None, lock: SummaryLock | None = None
    ) -> None:
        self.history = history
        """Where every input and output is kept and searched."""
        self.policy = summary
        """When and how conversations are summarized (None: they are not)."""
        self.lock = lock
        self.summarizer: Summarizer | None = None
        """Folds the summaries (set when the agent is built, with a policy)."""
        self._host: Setup | None = None
        self._kept: Recent[str, tuple[str, tuple[int, int]]] = Recent(SUMMARIES_KEPT)
        self._writes = 0  # (summaries this plugin wrote or erased: ``reset``)

    def attach(self, host: Setup) -> None:
        self._host = host
        host.provide(HISTORY, self.history)
        policy = self.policy
        if policy is not None and policy.every > 0:
            self.summarizer = Summarizer(host, self.history, policy, lock=self.lock)
            host.provide(SUMMARIZER, self.summarizer)

    async def loaded(self, state: ContextState[Any]) -> None:
        summary = await self._summary(state.id)
        if summary:  # the model wrote it from what people said: escaped like them
            text = f"<summary>{escape_text(summary)}</summary>"
            show(state.sections, PromptSection(name="summary", text=text, order=30))

    async def _summary(self, cid: str) -> str:
        """The text of ``cid``'s summary. Kept between runs when the conversations run in this process alone (no
        queue shared with others): only this process writes their summaries then, through this plugin (its
        summarizer's folds, ``reset``), so what it read stays true until one of those, which any fold or reset
        here makes it read again. Before the model is called, that is one thread's round trip with SQLite less
        (``bench/latency.py``, issue 51)."""
        now = (self.summarizer.folds if self.summarizer is not None else 0, self._writes)
        kept = self._kept.used(cid)
        if kept is not None and kept[1] == now:
            return kept[0]
        with tracing.span("read history summary"):
            text = (await self.history.summary(cid)).text
        if self._host is not None and not self._host.distributed:
            self._kept.keep(cid, (text, now))  # (a fold or reset since ``now`` was taken: read again next time)
        return text

    async def saved(self, state: ContextState[Any], chain: Sequence[Log]) -> None:
        """Add the run's inputs and outputs to the history (a store that fails is logged: the conversation goes on
        without it), then fold its summary if one is due (after the answer: it never delays it)."""
        entries = history_entries(state, chain)
        try:
            await self.history.append(state.id, entries)
        except RunError as exc:
            log.warning("history of %s: %d entries not stored: %s", state.id, len(entries), exc)
        if self.summarizer is not None:
            self.summarizer.schedule(state.id)

    async def reset(self, context_id: str, *, erase: bool) -> None:
        """``/reset``: the summary goes, the history stays searchable; ``/forget`` (``erase``): both go."""
        self._forget_kept(context_id)
        try:
            if erase and self.summarizer is not None:
                self.summarizer.cancel(context_id)
            try:
                newest = await self.history.search(context_id, limit=1)
                old = await self.history.summary(context_id)
                upto = max(old.upto, newest[0].seq if newest else 0)
                await self.history.set_summary(context_id, Summary(text="", upto=upto), expected=old.upto)
            except RunError as exc:
                log.warning("reset of %s: the summary is kept (history store unavailable): %s", context_id, exc)
            if erase:
                await self.history.forget(context_id)
        finally:
            self._forget_kept(context_id)  # (a read that began while it was written is not kept either)

    def _forget_kept(self, context_id: str) -> None:
        """The summary kept for ``context_id`` goes, and a read of it going on is not kept (``_summary``)."""
        self._writes += 1
        self._kept.pop(context_id, None)

    async def forgotten(self, context_id: str, entries: Sequence[InputRef], message_ids: Collection[str]) -> None:
        """Deleted messages leave the history too (also those that left the working memory long ago, found by
        their message id); when one had, it may be in the summary, which goes (as ``/reset``)."""
        try:
            removed = await self.history.delete(
                context_id,
                [history_id(entry) for entry in entries],
                messages=sorted(message_ids),
            )
        except RunError as exc:
            log.warning("%s: deleted messages stay in the history: %s", context_id, exc)
            return
        if removed > len(entries):
            await self.reset(context_id, erase=False)

    async def stop(self) -> None:
        if self.summarizer is not None:
            await self.summarizer.stop()
        await self.history.close()
