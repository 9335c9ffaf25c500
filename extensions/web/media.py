"""Pictures and spoken replies on the web chat's pages: the bytes stay in the process holding the visitor's page
(``MediaShelf``), the page gets an event naming them (``{"op": "media", "kind": "picture" | "voice", "url":
"chat/media/<token>", "caption": ...}``) and shows an ``<img>`` or an ``<audio>`` element whose address is served by
the web chat itself (``GET /chat/media/<token>``), to the visitor it was made for only (their signed cookie), with
the type checked from the bytes (a picture is a JPEG, PNG, GIF or WebP; a voice message is OGG).

In a fleet the worker that ran the conversation sends the bytes to the gateway holding the page with the event
(base64, through the relay: ``relay_event``); the gateway shelves them (``MediaShelf.page_event``). The shelf is
bounded (``MAX_BYTES`` in all, ``KEEP_SECONDS`` each) and kept in memory only: a page opened later shows the
conversation's text, not its pictures.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from core.media import Outgoing, OutgoingKind, sniff_image

__all__ = ("KEEP_SECONDS", "MAX_BYTES", "MediaShelf", "Shelved", "checked_mime", "relay_event")

MAX_BYTES = 64 * 1024 * 1024
"""Bytes of media kept for the pages of one process at most (the oldest go first)."""
KEEP_SECONDS = 24 * 3600.0
"""Seconds one picture or voice message stays reachable from its page."""
ITEM_LIMIT = 16 * 1024 * 1024
"""Bytes of one picture or voice message at most (larger ones are not shown)."""


@dataclass(frozen=True, kw_only=True)
class Shelved:
    """One picture or voice message waiting for its visitor's page to ask for it."""

    visitor: str
    """The only visitor it is served to."""
    mime: str
    """Its type, checked from its bytes."""
    data: bytes
    """The bytes."""
    until: float
    """When it stops being served (``time.monotonic``)."""


def checked_mime(kind: str, data: bytes) -> str | None:
    """The type to serve ``data`` with, read from the bytes themselves (never from what the sender claimed): a
    picture's image type, ``audio/ogg`` for a voice message; None when the bytes are not what ``kind`` says."""
    if kind == OutgoingKind.PICTURE.value:
        return sniff_image(data)
    if kind == OutgoingKind.VOICE.value:
        return "audio/ogg" if data.startswith(b"OggS") else None
    return None


def relay_event(item: Outgoing) -> dict[str, Any]:
    """The event carrying ``item`` to the process holding the page (its bytes in base64)."""
    return {
        "op": "media",
        "kind": item.kind.value,
        "caption": item.caption,
        "data": base64.b64encode(item.data).decode("ascii"),
    }


class MediaShelf:
    """The pictures and voice messages of the pages open in this process, by random token."""

    def __init__(self, *, max_bytes: int = MAX_BYTES, keep_seconds: float = KEEP_SECONDS) -> None:
        self.max_bytes = max_bytes
        """Bytes kept at most."""
        self.keep_seconds = keep_seconds
        """Seconds each item is kept."""
        self._items: OrderedDict[str, Shelved] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, visitor: str, kind: str, data: bytes) -> str | None:
        """Keep ``data`` for ``visitor``; its token, or None when the bytes are not a ``kind`` or too large."""
        mime = checked_mime(kind, data)
        if mime is None or len(data) > min(ITEM_LIMIT, self.max_bytes):
            return None
        self._sweep()
        while self._items and self._bytes + len(data) > self.max_bytes:
            self._drop(next(iter(self._items)))
        token = secrets.token_urlsafe(18)
        self._items[token] = Shelved(visitor=visitor, mime=mime, data=data, until=time.monotonic() + self.keep_seconds)
        self._bytes += len(data)
        return token

    def get(self, visitor: str, token: str) -> Shelved | None:
        """The item ``token`` if it was made for ``visitor`` and is still kept."""
        item = self._items.get(token)
        if item is None or item.visitor != visitor:
            return None
        if item.until < time.monotonic():
            self._drop(token)
            return None
        return item

    def page_event(self, visitor: str, event: dict[str, Any]) -> dict[str, Any] | None:
        """The event a page is shown for a media event carrying bytes (``relay_event``): the bytes shelved, the
        event naming their address instead; None when they cannot be shown (not base64, not their kind)."""
        kind = str(event.get("kind", ""))
        try:
            data = base64.b64decode(str(event.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            return None
        token = self.put(visitor, kind, data)
        if token is None:
            return None
        return {"op": "media", "kind": kind, "url": f"chat/media/{token}", "caption": str(event.get("caption", ""))}

    def _sweep(self) -> None:
        now = time.monotonic()
        for token in [t for t, item in self._items.items() if item.until < now]:
            self._drop(token)

    def _drop(self, token: str) -> None:
        item = self._items.pop(token, None)
        if item is not None:
            self._bytes -= len(item.data)
