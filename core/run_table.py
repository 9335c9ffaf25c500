"""The runs going on in this process: one per context instance, each driven by a task the table owns until it
ends, is cancelled (a lost lease), or the agent stops."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

from .busy import quiet_wait_ms
from .definitions import ContextState
from .engine import Run
from .entries import InputRef, Log, now_ms
from .events import RunEvent
from .reply_ledger import ReplyLedger
from .task_runner import finish_or_cancel

__all__ = ("Pending", "RunTable")


class Pending:
    """Stands in the table while a new run loads its state; inputs that arrive meanwhile wait here."""

    def __init__(self, inputs: list[InputRef], listener: Callable[[RunEvent], Any] | None) -> None:
        self.inputs = inputs
        """Inputs the run takes once its state is loaded."""
        self.listeners: list[Callable[[RunEvent], Any]] = [listener] if listener is not None else []
        """Listeners of the run's events."""
        self.batch: str | None = None
        """The queued batch the run answers (kept in its state's values, ``core.reply_ledger.BATCH``)."""
        self.finished: asyncio.Future[list[Log]] = asyncio.get_running_loop().create_future()
        """Resolved with the run's chain."""
        self.ledger: ReplyLedger | None = None
        """The queued run's reply ledger, given to its state."""
        self.following: Pending | None = None
        """The run after this one, for the inputs this one has no room for (``room``)."""
        self.stopped = False
        """A Stop was pressed before the run began (``Agent.stop_answer``): it starts stopped."""

    def room(self, cap: int) -> Pending:
        """This pending run, or the first following one with fewer than ``cap`` inputs (0: no cap)."""
        target = self
        while cap and len(target.inputs) >= cap:
            if target.following is None:
                target.following = Pending([], None)
            target = target.following
        return target

    async def quiet(self, quiet_ms: int, *, cap: int) -> None:
        """Wait until no input joined this pending run for ``quiet_ms`` (``core.busy``: a burst is one turn), or it
        holds ``cap`` inputs (0: no cap), or a Stop was pressed."""
        if not self.inputs:
            return
        first = min(ref.timestamp for ref in self.inputs)
        while not self.stopped and not (cap and len(self.inputs) >= cap):
            last = max(ref.timestamp for ref in self.inputs)
            wait = quiet_wait_ms(now=now_ms(), first=first, last=last, quiet_ms=quiet_ms)
            if not wait:
                return
            await asyncio.sleep(min(wait, quiet_ms) / 1000)


class RunTable:
    """The run (or the run being set up) of each context instance in this process, and their tasks."""

    def __init__(self) -> None:
        self._entries: dict[str, Run | Pending] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._task_of: dict[str, asyncio.Task[Any]] = {}
        self._origin: dict[str, Pending] = {}  # the pending run each run came from: its ``following`` wait for it

    def get(self, cid: str) -> Run | Pending | None:
        """The run of ``cid`` (or the one being set up), if any."""
        return self._entries.get(cid)

    def state_of(self, cid: str) -> ContextState | None:
        """The state of the run of ``cid``, None when none is running."""
        entry = self._entries.get(cid)
        return entry.state if isinstance(entry, Run) else None

    def put(self, cid: str, entry: Run | Pending, *, origin: Pending | None = None) -> None:
        """Make ``entry`` the run of ``cid`` (``origin``: the pending run it was set up from)."""
        self._entries[cid] = entry
        if origin is not None:
            self._origin[cid] = origin
        else:
            self._origin.pop(cid, None)

    def after(self, cid: str) -> Pending | None:
        """The pending run that follows the run of ``cid`` (made now if none does yet): inputs that must wait for
        the run in progress go there (``core.busy``). None when ``cid`` has no run set up from a pending one."""
        origin = self._origin.get(cid)
        if origin is None or self._entries.get(cid) is None:
            return None
        if origin.following is None:
            origin.following = Pending([], None)
        return origin.following

    def waiting(self, cid: str) -> list[Pending]:
        """The pending runs of ``cid``: the one being set up, or those after the run in progress."""
        entry = self._entries.get(cid)
        found: list[Pending] = []
        pending = entry if isinstance(entry, Pending) else self._origin.get(cid)
        if isinstance(entry, Pending):
            found.append(entry)
        while pending is not None and pending.following is not None:
            pending = pending.following
            found.append(pending)
        return found

    def release(self, cid: str, entry: Run | Pending) -> None:
        """``entry`` is over: take it out, unless a newer run took its place."""
        if self._entries.get(cid) is entry:
            del self._entries[cid]
            self._origin.pop(cid, None)

    def start(self, cid: str, job: Coroutine[Any, Any, None], *, context: contextvars.Context) -> asyncio.Task[None]:
        """Drive the run of ``cid`` with ``job``, in a task the table owns (``context``: its context variables)."""
        task = asyncio.create_task(job, name=f"run:{cid}", context=context)
        self._tasks.add(task)
        self._task_of[cid] = task
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda t: self._task_of.pop(cid, None) if self._task_of.get(cid) is t else None)
        return task

    def cancel(self, cid: str) -> bool:
        """Cancel the run of ``cid``; True if there was one to cancel."""
        task = self._task_of.get(cid)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def drain(self, timeout: float) -> None:
        """Let the runs finish for up to ``timeout`` seconds, then cancel the rest and wait for them."""
        await finish_or_cancel(self._tasks, timeout)
