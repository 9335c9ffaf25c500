"""The state log (seed: Acts of Emergence 008, Agent/Output).

An action call may carry ``_outputPath`` (``†state.user.summary``): its result is appended to the context's
state log as a data entry with hidden ``_call``, ``_date`` and ``_outputMethod`` (``set`` by default,
``merge`` or ``push``). A ``†kind.path`` reference in a later call's arguments reads the log newest to oldest
for each leaf under that path: ``set`` stops the walk; ``merge`` and ``push`` are gathered until a ``set`` or
the start, then replayed oldest to newest. Objects are written leaf by leaf, so a write to ``†state.user``
with only ``status`` hides only ``status``. The log is append-only; ``compact`` folds it into snapshot
``set`` entries without changing any resolved value.

References and output paths are written in one small grammar:

- a *path* is ``†`` then dot-separated names: ``†state.user.name``;
- a string that is exactly one path takes the value as it is (a number stays a number); paths inside longer
  text (``"Hello †state.user.name!"``) are replaced by their text (JSON for anything but a string);
- an *expression* is paths joined by ``&&`` and ``||`` (``&&`` binds tighter, no parentheses), written as a
  whole string. In a reference, ``†a || †b`` is the first operand that has a value (written and not null)
  and ``†a && †b`` is the last operand when every one has a value, none otherwise. In an output path,
  ``†a && †b`` writes the result to both paths, and ``†a || †b`` writes it to the first alternative whose
  every path is still empty (``†draft || †final``: the first result fills the draft, the second the final);
  when every alternative already holds a value nothing is written and the call reports an error, so no
  value is ever overwritten by surprise.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pydantic

from .entries import now_ms
from .errors import TemplateError, ValidationError

__all__ = (
    "MARK",
    "Expr",
    "Lookup",
    "Method",
    "Path",
    "StateEntry",
    "StateLog",
    "choose_targets",
    "evaluate",
    "find_refs",
    "parse_expr",
    "parse_path",
    "path_text",
    "substitute",
)

MARK = "†"
"""The mark that starts a state path."""
Method = Literal["set", "merge", "push"]
Path = tuple[str, ...]
"""A state path as names: ``("state", "user", "name")``."""
Expr = tuple[tuple[Path, ...], ...]
"""An expression: alternatives (``||``) of paths that go together (``&&``). A single path is ``((path,),)``."""
Lookup = Callable[[Path], tuple[bool, Any]]
"""Reads one path: ``(found, value)`` (``StateLog.resolve``)."""

_NAMES = r"([A-Za-z_][\w-]*)((?:\.[A-Za-z_0-9][\w-]*)*)"
_PATH = re.compile(rf"^†{_NAMES}$")
_IN_TEXT = re.compile(rf"†{_NAMES}")
_OR = re.compile(r"\s*\|\|\s*")
_AND = re.compile(r"\s*&&\s*")


def parse_path(text: str) -> Path:
    """``†state.user.name`` -> ``("state", "user", "name")``; raises ``ValidationError`` if malformed."""
    m = _PATH.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValidationError(
            f"{text!r} is not a state path: write † then dot-separated names, for example †state.user.name"
        )
    return (m.group(1), *[p for p in m.group(2).split(".") if p])


def path_text(path: Path) -> str:
    """``("state", "user")`` -> ``†state.user``."""
    return MARK + ".".join(path)


def parse_expr(text: str) -> Expr:
    """``†a && †b || †c`` -> ``(((a,), (b,)), ((c,),))``; a single path is an expression of one operand.

    Raises ``ValidationError`` when ``text`` is not paths joined by ``&&`` and ``||``."""
    if not isinstance(text, str) or not text.strip().startswith(MARK):
        raise ValidationError(f"{text!r} is not a state path or expression: write †state.x, †a || †b or †a && †b")
    try:
        return tuple(tuple(parse_path(p) for p in _AND.split(alt.strip())) for alt in _OR.split(text.strip()))
    except ValidationError:
        raise ValidationError(
            f"{text!r} is not a state path or expression: write † then dot-separated names, joined by || "
            "(the first that has a value) or && (all of them), for example †state.a || †state.b"
        ) from None


def _whole(text: str) -> Expr | None:
    """The expression ``text`` is as a whole, or None when it is text (maybe with paths inside)."""
    stripped = text.strip()
    if not stripped.startswith(MARK):
        return None
    try:
        return parse_expr(stripped)
    except ValidationError:
        return None


def _operands(expr: Expr) -> Iterator[Path]:
    for alt in expr:
        yield from alt


def find_refs(value: Any) -> Iterator[Path]:
    """Every path ``value`` refers to: whole-string paths and expressions, and paths inside longer text.
    ``_outputPath`` is where a result goes, not a reference, and is skipped."""
    if isinstance(value, str):
        if MARK not in value:
            return
        expr = _whole(value)
        if expr is not None:
            yield from _operands(expr)
            return
        for m in _IN_TEXT.finditer(value):
            yield (m.group(1), *[p for p in m.group(2).split(".") if p])
    elif isinstance(value, dict):
        for k, v in value.items():
            if k != "_outputPath":
                yield from find_refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from find_refs(v)


def _has_value(found: bool, value: Any) -> bool:
    return found and value is not None


def evaluate(expr: Expr, lookup: Lookup) -> tuple[bool, Any]:
    """``(found, value)`` of a reference: one path as it is; for ``||``, the first alternative that has a
    value; for ``&&``, the last operand when every operand has a value."""
    if len(expr) == 1 and len(expr[0]) == 1:
        return lookup(expr[0][0])
    for alt in expr:
        value: Any = None
        for path in alt:
            found, value = lookup(path)
            if not _has_value(found, value):
                break
        else:
            return True, value
    return False, None


def choose_targets(expr: Expr, lookup: Lookup) -> tuple[Path, ...] | None:
    """Where an output path writes: every path of its one alternative (``†a && †b``), or the paths of the
    first alternative that is still empty (``†a || †b``); None when every alternative holds a value."""
    if len(expr) == 1:
        return expr[0]
    for alt in expr:
        if not any(_has_value(*lookup(path)) for path in alt):
            return alt
    return None


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def substitute(value: Any, lookup: Lookup) -> Any:
    """Replace the references in ``value`` (a string, or lists and dicts of them; ``_outputPath`` stays).

    A whole-string reference or expression takes the value as it is; paths inside longer text are replaced
    by their text. Raises ``TemplateError`` naming the reference that has no value."""
    if isinstance(value, str):
        if MARK not in value:
            return value
        expr = _whole(value)
        if expr is not None:
            found, result = evaluate(expr, lookup)
            if not found:
                raise TemplateError(_no_value(value.strip(), expr))
            return result

        def one(m: re.Match[str]) -> str:
            path = (m.group(1), *[p for p in m.group(2).split(".") if p])
            found, result = lookup(path)
            if not found:
                raise TemplateError(_no_value(m.group(0), ((path,),)))
            return _as_text(result)

        return _IN_TEXT.sub(one, value)
    if isinstance(value, dict):
        return {k: v if k == "_outputPath" else substitute(v, lookup) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, lookup) for v in value]
    return value


def _no_value(written: str, expr: Expr) -> str:
    if len(expr) == 1 and len(expr[0]) == 1:
        return f"{written} has no value"
    return f"{written} has no value: none of its alternatives has every path written"


class StateEntry(pydantic.BaseModel):
    """One data entry of the log. The model only ever sees folded values, never these fields."""

    model_config = pydantic.ConfigDict(populate_by_name=True)

    type: Literal["data"] = "data"
    path: list[str]
    """Where the value was written (``["state", "user"]``)."""
    data: Any = None
    """The value written."""
    call: dict[str, Any] | None = pydantic.Field(default=None, alias="_call")
    """The call that wrote it (name and arguments)."""
    date: int = pydantic.Field(default_factory=now_ms, alias="_date")
    """When it was written (ms since the epoch)."""
    method: Method = pydantic.Field(default="set", alias="_outputMethod")
    """How it combines with older values."""


def _is_prefix(prefix: Path, path: Path) -> bool:
    return path[: len(prefix)] == prefix


def _merge(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for k, v in new.items():
            out[k] = _merge(out[k], v) if k in out else copy.deepcopy(v)
        return out
    if isinstance(old, list) and isinstance(new, list):
        return [*old, *copy.deepcopy(new)]
    return copy.deepcopy(new)


def _node(tree: dict[str, Any], path: Path) -> dict[str, Any]:
    """The dict holding ``path[-1]``, created along the way (a non-dict in the way becomes a dict)."""
    node = tree
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    return node


def _apply(tree: dict[str, Any], path: Path, method: Method, value: Any) -> None:
    """Apply one write to ``tree`` (which holds roots as keys), oldest to newest."""
    if method == "push":
        node = _node(tree, path)
        old = node.get(path[-1])
        if isinstance(old, list):
            node[path[-1]] = [*old, copy.deepcopy(value)]
        elif old is None:
            node[path[-1]] = [copy.deepcopy(value)]
        else:
            node[path[-1]] = [old, copy.deepcopy(value)]
        return
    if isinstance(value, dict) and value:  # objects are written leaf by leaf (set and merge alike)
        for k, v in value.items():
            _apply(tree, (*path, str(k)), method, v)
        return
    node = _node(tree, path)
    if method == "merge" and path[-1] in node:
        node[path[-1]] = _merge(node[path[-1]], value)
    else:
        node[path[-1]] = copy.deepcopy(value)


def _replaces(entry: StateEntry, path: Path) -> bool:
    """True when ``entry`` fixes everything at ``path``: a ``set`` of a whole value at or above it."""
    if entry.method != "set" or not _is_prefix(tuple(entry.path), path):
        return False
    value = entry.data
    for key in path[len(entry.path) :]:
        if not isinstance(value, dict) or not value:
            return True  # a value above the path replaces what was below
        if key not in value:
            return False
        value = value[key]
    return not (isinstance(value, dict) and value)


class StateLog:
    """The append-only state log of one context."""

    __slots__ = ("_waiting", "dirty", "entries")

    def __init__(self, entries: list[StateEntry] | None = None) -> None:
        self.entries: list[StateEntry] = entries or []
        """Oldest first."""
        self.dirty = False
        """True when entries were added since the log was loaded."""
        self._waiting: list[asyncio.Future[None]] = []

    def append(self, path: Path, data: Any, *, method: Method = "set", call: dict[str, Any] | None = None) -> None:
        """Add an entry (nothing is ever rewritten)."""
        self.entries.append(
            StateEntry.model_validate({"path": list(path), "data": data, "_outputMethod": method, "_call": call})
        )
        self.dirty = True
        if self._waiting:
            self.notify()

    def notify(self) -> None:
        """Wake whoever waits in ``changed`` (``append`` does it; call it after adding to ``entries`` directly)."""
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(None)

    async def changed(self) -> None:
        """Return once an entry is added (a reference waiting for an input that writes what it reads)."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        try:
            await future
        finally:
            if future in self._waiting:
                self._waiting.remove(future)

    def resolve(self, path: Path) -> tuple[bool, Any]:
        """``(found, value)`` of ``path``.

        Walks the log newest to oldest, gathering the writes at, above or below ``path`` until one ``set``
        fixes the whole value there, then replays them oldest to newest.
        """
        gathered: list[StateEntry] = []
        for entry in reversed(self.entries):
            entry_path = tuple(entry.path)
            if not (_is_prefix(entry_path, path) or _is_prefix(path, entry_path)):
                continue
            gathered.append(entry)
            if _replaces(entry, path):
                break
        if not gathered:
            return False, None
        tree: dict[str, Any] = {}
        for entry in reversed(gathered):
            _apply(tree, tuple(entry.path), entry.method, entry.data)
        node: Any = tree
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return False, None
            node = node[key]
        return True, node

    def roots(self) -> list[str]:
        """The root names written so far (``state``, ``data``), in first-write order."""
        seen: dict[str, None] = {}
        for entry in self.entries:
            if entry.path:
                seen.setdefault(entry.path[0], None)
        return list(seen)

    def folded(self) -> dict[str, Any]:
        """Every root's current value: what the model is shown."""
        out: dict[str, Any] = {}
        for root in self.roots():
            found, value = self.resolve((root,))
            if found:
                out[root] = value
        return out

    def compact(self) -> None:
        """Replace the log with one snapshot ``set`` entry per root, keeping every resolved value."""
        snapshot = []
        for root in self.roots():
            found, value = self.resolve((root,))
            if found:
                snapshot.append(
                    StateEntry.model_validate(
                        {"path": [root], "data": value, "_outputMethod": "set", "_call": {"name": "compaction"}}
                    )
                )
        self.entries = snapshot
        self.dirty = True

    def dump(self) -> list[dict[str, Any]]:
        """JSON-compatible form (hidden fields under their seed names)."""
        return [e.model_dump(mode="json", by_alias=True) for e in self.entries]

    @classmethod
    def load(cls, raw: Any) -> StateLog:
        """Rebuild from ``dump``; anything unreadable starts an empty log."""
        if not raw:
            return cls()
        try:
            return cls([StateEntry.model_validate(e) for e in raw])
        except pydantic.ValidationError:
            return cls()
