"""``core.recent.Recent``: the caches a process keeps between runs hold the most recently kept or used entries."""

from __future__ import annotations

from core.recent import Recent


def test_the_least_recently_kept_or_used_entry_leaves_first() -> None:
    kept: Recent[str, int] = Recent(2)
    kept.keep("a", 1)
    kept.keep("b", 2)
    assert kept.used("a") == 1  # (now the most recent)
    kept.keep("c", 3)
    assert list(kept) == ["a", "c"]
    kept.keep("a", 4)  # (kept again: its new value, the most recent)
    kept.keep("d", 5)
    assert dict(kept) == {"a": 4, "d": 5}
    assert kept.used("c") is None
