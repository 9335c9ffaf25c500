"""The state log: seed semantics, and compaction that never changes a resolved value."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ValidationError
from core.statelog import StateLog, find_refs, parse_path


def test_the_seed_example() -> None:
    log = StateLog()
    log.append(("data",), {"user": {"name": "Alex", "status": "active"}})
    log.append(parse_path("†data.user.status"), "inactive", call={"_tool": "updateUserStatus"})
    assert log.resolve(parse_path("†data.user.status")) == (True, "inactive")
    assert log.resolve(parse_path("†data.user.name")) == (True, "Alex")


def test_a_partial_object_write_hides_only_its_leaves() -> None:
    log = StateLog()
    log.append(("state", "user"), {"name": "Ada", "status": "away"})
    log.append(("state", "user"), {"status": "here"})
    assert log.resolve(("state", "user")) == (True, {"name": "Ada", "status": "here"})
    assert log.resolve(("state", "user", "name")) == (True, "Ada")


def test_push_and_merge_replay_until_a_set() -> None:
    log = StateLog()
    log.append(("state", "tags"), "old", method="push")
    log.append(("state", "tags"), ["a"])
    log.append(("state", "tags"), "b", method="push")
    log.append(("state", "tags"), ["c", "d"], method="merge")
    assert log.resolve(("state", "tags")) == (True, ["a", "b", "c", "d"])


def test_a_scalar_above_hides_older_values_below() -> None:
    log = StateLog()
    log.append(("state", "user", "name"), "Ada")
    log.append(("state", "user"), "gone")
    assert log.resolve(("state", "user", "name")) == (False, None)
    assert log.resolve(("state", "user")) == (True, "gone")


def test_paths_and_refs() -> None:
    assert parse_path("†state.user.name") == ("state", "user", "name")
    with pytest.raises(ValidationError, match="not a state path"):
        parse_path("state.user")
    assert list(find_refs({"a": "†state.x", "b": ["†data.y", "plain"], "_outputPath": "†state.z"})) == [
        ("state", "x"),
        ("data", "y"),
    ]


def test_dump_load_round_trip_keeps_hidden_fields() -> None:
    log = StateLog()
    log.append(("state", "x"), 1, method="merge", call={"name": "a"})
    raw = log.dump()
    assert set(raw[0]) == {"type", "path", "data", "_call", "_date", "_outputMethod"}
    again = StateLog.load(raw)
    assert again.resolve(("state", "x")) == (True, 1)
    assert StateLog.load([{"garbage": True}]).entries == []


KEYS = st.sampled_from(["a", "b", "c"])
PATHS = st.lists(KEYS, min_size=0, max_size=3).map(lambda rest: ("state", *rest))
LEAF = st.one_of(st.integers(0, 9), st.text("xy", max_size=2), st.lists(st.integers(0, 3), max_size=2))
VALUES = st.recursive(LEAF, lambda inner: st.dictionaries(KEYS, inner, max_size=3), max_leaves=6)
WRITE = st.tuples(PATHS, VALUES, st.sampled_from(["set", "merge", "push"]), st.booleans())


def _all_paths() -> list[tuple[str, ...]]:
    keys = ["a", "b", "c"]
    out: list[tuple[str, ...]] = [("state",)]
    for a in keys:
        out.append(("state", a))
        for b in keys:
            out.append(("state", a, b))
            out.extend(("state", a, b, c) for c in keys)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(WRITE, max_size=25))
def test_compaction_never_changes_a_resolved_value(writes: list[tuple[Any, Any, Any, bool]]) -> None:
    plain, compacted = StateLog(), StateLog()
    for path, value, method, compact_now in writes:
        plain.append(path, value, method=method)
        compacted.append(path, value, method=method)
        if compact_now:
            compacted.compact()
        for p in _all_paths():
            assert compacted.resolve(p) == plain.resolve(p), p
    compacted.compact()
    assert len(compacted.entries) <= 1
    for p in _all_paths():
        assert compacted.resolve(p) == plain.resolve(p), p
