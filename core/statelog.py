"""The state log (seed: Acts of Emergence 008, Agent/Output).

An action call may carry ``_outputPath`` (``†state.user.summary``): its result is appended to the context's
state log as a data entry with hidden ``_call``, ``_date`` and ``_outputMethod`` (``set`` by default,
``merge`` or ``push``). A ``†kind.path`` reference in a later call's arguments reads the log newest to oldest
for each leaf under that path: ``set`` stops the walk; ``merge`` and ``push`` are gathered until a ``set`` or
the start, then replayed oldest to newest. Objects are written leaf by leaf, so a write to ``†state.user``
with only ``status`` hides only ``status``. The log is append-only; ``compact`` folds it into snapshot
``set`` entries without changing any resolved value.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any, Literal

import pydantic

from .entries import now_ms
from .errors import ValidationError

__all__ = (
    "MARK",
    "Method",
    "StateEntry",
    "StateLog",
    "find_refs",
    "parse_path",
)

MARK = "†"
"""The mark that starts a state path."""
Method = Literal["set", "merge", "push"]
Path = tuple[str, ...]

_PATH = re.compile(r"^†([A-Za-z_][\w-]*)((?:\.[A-Za-z_0-9][\w-]*)*)$")
_MISSING: Any = object()


def parse_path(text: str) -> Path:
    """``†state.user.name`` -> ``("state", "user", "name")``; raises ``ValidationError`` if malformed."""
    m = _PATH.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValidationError(
            f"{text!r} is not a state path: write † then dot-separated names, for example †state.user.name"
        )
    return (m.group(1), *[p for p in m.group(2).split(".") if p])


def find_refs(value: Any) -> Iterator[Path]:
    """Every ``†path`` string in ``value`` (whole strings only)."""
    if isinstance(value, str):
        if value.startswith(MARK):
            try:
                yield parse_path(value)
            except ValidationError:
                return
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in ("_outputPath",):
                yield from find_refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from find_refs(v)


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

    __slots__ = ("dirty", "entries")

    def __init__(self, entries: list[StateEntry] | None = None) -> None:
        self.entries: list[StateEntry] = entries or []
        """Oldest first."""
        self.dirty = False
        """True when entries were added since the log was loaded."""

    def append(self, path: Path, data: Any, *, method: Method = "set", call: dict[str, Any] | None = None) -> None:
        """Add an entry (nothing is ever rewritten)."""
        self.entries.append(
            StateEntry.model_validate({"path": list(path), "data": data, "_outputMethod": method, "_call": call})
        )
        self.dirty = True

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
