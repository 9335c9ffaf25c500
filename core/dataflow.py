"""The calls of one response as a dependency graph (seed: Acts of Emergence 008, Plan and Instancing).

Output paths are the wires between calls: a call that reads ``†state.x`` waits for the calls of the same
response that write there, and calls that share nothing run in parallel. Each call of a response has a
``CallSlot`` (its future result, the paths it may write, the calls it waits for); ``ResponseCalls`` is the list
of them, which the step loop fills as the model's tags close and ``close``\\ s when the response ends.

What a reference waits for (``settle``):

- a path that already has a value waits only for the *earlier* calls of the response that write at, above
  or below it, so the value it reads is the one the calls before it leave (order matters, as it reads);
- a path that has no value yet waits for *any* call of the response that writes it, earlier or later (a
  deferred reference: a plan may be written in any order); when no call known so far writes it, it waits for
  more calls until the response is closed, and then reports that nothing in the response writes it;
- a call never waits for itself, and a wait that would close a cycle (``a`` reads what ``b`` writes while
  ``b`` reads what ``a`` writes) fails at once with the cycle named, instead of hanging the run.

``run_plan`` runs calls that are all known beforehand the same way (the step loop does it incrementally).
``instances`` reads a call's ``_instances`` (one call run as N copies in parallel); ``Workspace`` is the
private state a copy reads and writes while it runs, so no copy sees or spoils another's writes. When every copy
has finished, their writes are gathered into the context's log (``gather``) by one rule:

- what only one copy wrote, and what several copies ``push`` to one list, is added as written, in copy order
  (the pushes of copy 0 first);
- a path that more than one copy writes otherwise (``set`` or ``merge`` at the same path, or one copy at a path
  and another above or below it) is never left to the last copy: the path (the upper one of the two) is set to the
  list of what each copy left there, in copy order (``null`` for a copy that left nothing there), and the call's
  result tells the model so. Three copies that set ``†state.scratch`` leave ``[v0, v1, v2]`` there.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import TemplateError, ValidationError
from .statelog import Method, Path, StateEntry, StateLog, path_text

__all__ = (
    "MAX_INSTANCES",
    "CallSlot",
    "PlanStep",
    "ResponseCalls",
    "Workspace",
    "current_workspace",
    "gather",
    "instances",
    "related",
    "run_instances",
    "run_plan",
    "settle",
    "wait_for_calls",
)

MAX_INSTANCES = 32
"""At most this many copies of one call."""

current_workspace: contextvars.ContextVar[Workspace | None] = contextvars.ContextVar("workspace", default=None)
"""The workspace of the instanced copy running in this task, if any."""


def related(a: Path, b: Path) -> bool:
    """True when a write at one path changes what the other reads (one is a prefix of the other)."""
    return a[: len(b)] == b or b[: len(a)] == a


class CallSlot:
    """The future result of one action call within a response, for ``{{calls[n]}}`` templates and references."""

    __slots__ = ("error", "future", "name", "targets", "waiting")

    def __init__(self, name: str, *, targets: Iterable[Path] = ()) -> None:
        self.name = name
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.error: str | None = None
        self.targets: tuple[Path, ...] = tuple(targets)
        """Every path the call may write (each path of an ``_outputPath`` expression), known when it starts."""
        self.waiting: set[CallSlot] = set()
        """The calls this one is waiting for right now (to find cycles)."""

    def set(self, value: Any) -> None:
        if not self.future.done():
            self.future.set_result(value)

    def fail(self, message: str) -> None:
        self.error = message
        if not self.future.done():
            self.future.set_result(None)

    @property
    def done(self) -> bool:
        """True once the call has a result or an error."""
        return self.future.done()

    def may_write(self, path: Path) -> bool:
        """True when this call may write at, above or below ``path``."""
        return any(related(t, path) for t in self.targets)

    def __repr__(self) -> str:
        return f"CallSlot({self.name!r})"


class ResponseCalls(list[CallSlot]):
    """The calls of one response, in the order the model wrote them; ``close`` once no call can follow."""

    def __init__(self, slots: Iterable[CallSlot] = ()) -> None:
        super().__init__(slots)
        self.closed = False
        """True once the response has ended: every call of it is here."""
        self._changed: asyncio.Future[None] | None = None

    def append(self, slot: CallSlot) -> None:
        super().append(slot)
        self._wake()

    def close(self) -> None:
        """No more calls: references to paths nobody writes stop waiting and fail."""
        self.closed = True
        self._wake()

    async def changed(self) -> None:
        """Return once a call is added or the response is closed."""
        if self._changed is None:
            self._changed = asyncio.get_running_loop().create_future()
        await self._changed

    def _wake(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)


def _chain(start: CallSlot, target: CallSlot) -> list[CallSlot] | None:
    """The calls from ``start`` to ``target`` through what each waits for, or None when none leads there."""
    stack: list[tuple[CallSlot, list[CallSlot]]] = [(start, [start])]
    seen: set[int] = set()
    while stack:
        slot, path = stack.pop()
        if slot is target:
            return path
        if id(slot) in seen:
            continue
        seen.add(id(slot))
        stack.extend((w, [*path, w]) for w in slot.waiting)
    return None


async def wait_for_calls(me: CallSlot | None, calls: Sequence[CallSlot]) -> None:
    """Wait until every call of ``calls`` is done; raise ``TemplateError`` if one of them waits for ``me``."""
    pending = [c for c in calls if not c.done and c is not me]
    if not pending:
        return
    if me is not None:
        for call in pending:
            chain = _chain(call, me)
            if chain is not None:
                names = " -> ".join(s.name for s in [me, *chain])
                raise TemplateError(
                    f"these calls wait for each other ({names}): each reads what another one writes; "
                    "write the first value in one call and read it in the next"
                )
        me.waiting.update(pending)
    try:
        for call in pending:
            await asyncio.shield(call.future)
    finally:
        if me is not None:
            me.waiting.difference_update(pending)


async def settle(
    calls: Sequence[CallSlot], me: int | None, paths: Iterable[Path], has_value: Callable[[Path], bool]
) -> str:
    """Wait until the values at ``paths`` are the ones this response leaves there for the call at index
    ``me`` (None: something after every call, an output); see the module docstring. Returns a note on the
    paths still without a value (``""`` if none): which call meant to write them failed, or that nothing in
    the response writes them."""
    wanted = tuple(dict.fromkeys(paths))
    if not wanted:
        return ""
    mine = calls[me] if me is not None and me < len(calls) else None
    while True:
        pending: list[CallSlot] = []
        for path in wanted:
            present = has_value(path)
            for i, slot in enumerate(calls):
                if slot is mine or slot.done or not slot.may_write(path):
                    continue
                if not present or me is None or i < me:
                    pending.append(slot)
        if pending:
            await wait_for_calls(mine, pending)
            continue
        missing = [p for p in wanted if not has_value(p)]
        if not missing or not isinstance(calls, ResponseCalls) or calls.closed:
            return _missing_note(calls, mine, missing)
        await calls.changed()


def _missing_note(calls: Sequence[CallSlot], mine: CallSlot | None, missing: Sequence[Path]) -> str:
    notes = []
    for path in missing:
        failed = [s for s in calls if s is not mine and s.may_write(path) and s.error is not None]
        writers = [s for s in calls if s is not mine and s.may_write(path)]
        if failed:
            note = f"the call that writes it ({failed[0].name}) failed: {failed[0].error}"
        elif writers:
            note = f"{writers[0].name} wrote its result elsewhere"
        else:
            note = (
                "nothing wrote it before, and no call of this response writes it "
                "(give a call _outputPath to write it first)"
            )
        notes.append(note if len(missing) == 1 else f"{path_text(path)}: {note}")
    return "; ".join(notes)


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanStep:
    """One call of a plan known beforehand."""

    name: str
    """The action's name (for messages)."""
    targets: tuple[Path, ...] = ()
    """The paths the call may write."""
    run: Callable[[ResponseCalls, int], Awaitable[Any]]
    """Runs the call: ``run(calls, index)`` settles its references with ``settle(calls, index, ...)`` first."""


async def run_plan(steps: Sequence[PlanStep]) -> ResponseCalls:
    """Run ``steps`` as a dependency graph: all start at once, each waits only for what it reads (through
    ``settle``), independent steps run in parallel. Returns the slots, each with its result or its error."""
    calls = ResponseCalls(CallSlot(s.name, targets=s.targets) for s in steps)
    calls.close()

    async def one(index: int, step: PlanStep) -> None:
        slot = calls[index]
        try:
            slot.set(await step.run(calls, index))
        except asyncio.CancelledError:
            slot.fail("cancelled")
            raise
        except Exception as exc:
            slot.fail(str(exc) or type(exc).__name__)

    async with asyncio.TaskGroup() as tg:
        for index, step in enumerate(steps):
            tg.create_task(one(index, step))
    return calls


def instances(raw: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The arguments of each copy of a call whose arguments hold ``_instances`` (taken out of ``raw``).

    ``_instances`` is a count (N copies with the same arguments) or a list of objects, each laid over the
    call's other arguments for its copy. None when the call is not instanced."""
    if "_instances" not in raw:
        return None
    spec = raw.pop("_instances")
    if isinstance(spec, bool) or not isinstance(spec, int | list):
        raise ValidationError(
            "_instances must be a number of copies or a list of objects (one per copy, laid over the other "
            f"arguments), not {type(spec).__name__}"
        )
    if isinstance(spec, int):
        if not 1 <= spec <= MAX_INSTANCES:
            raise ValidationError(f"_instances must be between 1 and {MAX_INSTANCES}, not {spec}")
        return [dict(raw) for _ in range(spec)]
    if not 1 <= len(spec) <= MAX_INSTANCES:
        raise ValidationError(f"_instances must list 1 to {MAX_INSTANCES} copies, not {len(spec)}")
    if not all(isinstance(item, dict) for item in spec):
        raise ValidationError("each item of _instances must be an object of arguments for one copy")
    return [{**raw, **item} for item in spec]


class Workspace:
    """The private state of one copy: it reads the context's log with its own writes on top, and its writes
    stay here until ``gather``."""

    __slots__ = ("base", "entries", "index")

    def __init__(self, base: StateLog, index: int) -> None:
        self.base = base
        """The context's log underneath."""
        self.index = index
        """Which copy this is (0-based)."""
        self.entries: list[StateEntry] = []
        """What the copy wrote, oldest first."""

    def resolve(self, path: Path) -> tuple[bool, Any]:
        """``(found, value)`` of ``path`` as this copy sees it."""
        if not self.entries:
            return self.base.resolve(path)
        return StateLog([*self.base.entries, *self.entries]).resolve(path)

    def append(self, path: Path, data: Any, *, method: Method = "set", call: dict[str, Any] | None = None) -> None:
        """Write into this copy's workspace."""
        self.entries.append(
            StateEntry.model_validate({"path": list(path), "data": data, "_outputMethod": method, "_call": call})
        )

    def value(self, path: Path) -> Any:
        """What this copy sees at ``path`` (None where nothing is)."""
        return self.resolve(path)[1]


def _shared(workspaces: Sequence[Workspace]) -> list[Path]:
    """The upper paths of the writes two copies or more make at related paths, pushes to one path apart."""
    found: list[Path] = []
    for i, mine in enumerate(workspaces):
        for other in workspaces[i + 1 :]:
            for a in mine.entries:
                for b in other.entries:
                    pa, pb = tuple(a.path), tuple(b.path)
                    if not related(pa, pb) or (pa == pb and a.method == "push" and b.method == "push"):
                        continue
                    found.append(pa if len(pa) <= len(pb) else pb)
    uppers = sorted(set(found), key=len)
    return [p for i, p in enumerate(uppers) if not any(related(p, q) for q in uppers[:i])]


def gather(log: StateLog, workspaces: Sequence[Workspace]) -> list[str]:
    """Add what the copies wrote to ``log`` by the module's rule; returns a note per path two copies shared."""
    shared = _shared(workspaces)
    for workspace in workspaces:
        for entry in workspace.entries:
            if not any(related(tuple(entry.path), p) for p in shared):
                log.entries.append(entry)
                log.dirty = True
    notes = []
    for path in shared:
        writers = [w.index for w in workspaces if any(related(tuple(e.path), path) for e in w.entries)]
        log.append(path, [w.value(path) for w in workspaces], call={"gathered": "instances", "copies": writers})
        shown = ", ".join(str(i) for i in writers)
        notes.append(
            f"copies {shown} each wrote {path_text(path)}: it now holds the list of what every copy left there, "
            "in copy order"
        )
    for workspace in workspaces:
        workspace.entries = []
    log.notify()
    return notes


async def run_instances(
    copies: Sequence[Any], run: Callable[[int, Any], Awaitable[Any]], log: StateLog
) -> tuple[list[tuple[Any, str | None]], list[str]]:
    """Run ``run(i, args)`` for every copy at once, each in its own ``Workspace`` over ``log``; once all are
    done, gather what they wrote into ``log`` (``gather``). Returns ``(result, error)`` per copy, in order (a
    copy that fails does not stop the others), and ``gather``'s notes."""
    outcomes: list[tuple[Any, str | None]] = [(None, None)] * len(copies)
    workspaces = [Workspace(log, i) for i in range(len(copies))]

    async def one(i: int, args: Any) -> None:
        current_workspace.set(workspaces[i])  # this task's own context: the sibling copies do not see it
        try:
            outcomes[i] = (await run(i, args), None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            outcomes[i] = (None, str(exc) or type(exc).__name__)

    async with asyncio.TaskGroup() as tg:
        for i, args in enumerate(copies):
            tg.create_task(one(i, args))
    return outcomes, gather(log, workspaces)
