"""The browsers connected to this process, by visitor: what a run writes reaches each open page of its visitor.

A page holds one event stream (``GET /chat/events``, server-sent events); ``Hub.listen(visitor)`` gives it a queue
and ``Hub.publish(visitor, event)`` puts an event in the queues of every page that visitor has open here. An event
is a small JSON object: ``{"op": "post" | "edit" | "delete" | "notice", "id": ..., "text": ...}``, or ``{"op":
"done", "id": ..., "html": ...}`` for an answer complete, laid out (``extensions.web.rich``). A page that is not open
misses the events; it reads the conversation's history when it opens.

In a fleet the run happens in a worker, not in the gateway holding the page: the worker publishes to that gateway's
channel (``extensions.web.relay``) and the gateway's relay calls ``publish`` here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ("MAX_PAGES", "QUEUE_SIZE", "Hub")

QUEUE_SIZE = 1000
"""Events waiting for one page at most; a page that reads none of them is cut off (it reconnects)."""
MAX_PAGES = 8
"""Pages one visitor may have open at once in one process (``Hub.full``); more are refused with 429."""


class Hub:
    """The event queues of the pages open in this process, by visitor."""

    def __init__(self) -> None:
        self._pages: dict[str, set[asyncio.Queue[dict[str, Any] | None]]] = {}

    def __len__(self) -> int:
        return sum(len(pages) for pages in self._pages.values())

    def full(self, visitor: str) -> bool:
        """True when ``visitor`` already has ``MAX_PAGES`` pages open here."""
        return len(self._pages.get(visitor, ())) >= MAX_PAGES

    def visitors(self) -> int:
        """Visitors with at least one page open."""
        return len(self._pages)

    @contextlib.contextmanager
    def listen(self, visitor: str) -> Iterator[asyncio.Queue[dict[str, Any] | None]]:
        """A queue of the events for ``visitor`` while the block lasts (``None`` in it: the page must close)."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(QUEUE_SIZE)
        self._pages.setdefault(visitor, set()).add(queue)
        try:
            yield queue
        finally:
            pages = self._pages.get(visitor)
            if pages is not None:
                pages.discard(queue)
                if not pages:
                    del self._pages[visitor]

    def publish(self, visitor: str, event: dict[str, Any]) -> int:
        """Give ``event`` to every open page of ``visitor``; returns how many got it."""
        delivered = 0
        for queue in list(self._pages.get(visitor, ())):
            try:
                queue.put_nowait(event)
                delivered += 1
            except asyncio.QueueFull:  # a page that reads nothing: close it, it reconnects and reads the history
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
                queue.put_nowait(None)
        return delivered

    def close(self) -> None:
        """Tell every open page to close (the server stops)."""
        for pages in self._pages.values():
            for queue in pages:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)
