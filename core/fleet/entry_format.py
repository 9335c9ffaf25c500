"""The format version of inbox entries, so old and new workers share one Redis during a rolling upgrade.

Each entry a gateway stores carries ``"v"``, the version of its format (``ENTRY_FORMAT``; an entry without one is
of format 1, the format before versions). A change to what an entry holds that an older worker would misread
raises ``ENTRY_FORMAT``; a worker that takes a batch holding an entry of a newer format than its own hands the
batch back untouched (no attempt counted, nothing dead-lettered) for a worker that reads it, as it does with a
batch another bot's gateway stored. So during a rolling upgrade the new gateways' batches wait for the new
workers, and the new workers read every older format too: upgrade the workers before the gateways.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ("ENTRY_FORMAT", "newest_format")

ENTRY_FORMAT = 1
"""The format of the entries this version writes and the newest it reads."""


def newest_format(entries: Iterable[Mapping[str, Any]]) -> int:
    """The newest format among ``entries`` (1 for entries written before formats had a version; a version that is
    not a whole number counts as newer than any, so it is left for a worker that knows it)."""
    newest = 1
    for entry in entries:
        version = entry.get("v", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            return 1 << 30
        newest = max(newest, version)
    return newest
