"""How a webhook proves where it comes from: the two signature schemes a source may use.

- ``hmac`` (the default): the sender signs ``<timestamp>.<body>`` with HMAC-SHA256 and the source's secret, and
  sends ``X-Webhook-Timestamp: <unix seconds>``, ``X-Webhook-Signature: sha256=<hex>`` and, optionally, a delivery
  id in ``X-Webhook-Id`` (the same id on each retry of one event). The timestamp bounds how late a request may be.
- ``github``: GitHub's ``X-Hub-Signature-256: sha256=<hex>`` of the body alone, the delivery id in
  ``X-GitHub-Delivery`` and the event in ``X-GitHub-Event``. GitHub sends no timestamp: a replay is refused by its
  signature and delivery id, remembered for ``WEBHOOKS_DEDUPE_SECONDS``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = (
    "EVENT_HEADERS",
    "ID_HEADERS",
    "SCHEMES",
    "Scheme",
    "Signed",
    "github_signature",
    "read_signature",
    "sign",
)

Scheme = Literal["hmac", "github"]
"""A source's signature scheme."""

SCHEMES: tuple[Scheme, ...] = ("hmac", "github")

TIMESTAMP_HEADER = "X-Webhook-Timestamp"
SIGNATURE_HEADER = "X-Webhook-Signature"
ID_HEADERS: dict[Scheme, str] = {"hmac": "X-Webhook-Id", "github": "X-GitHub-Delivery"}
"""The header of a delivery's id, by scheme."""
EVENT_HEADERS: dict[Scheme, str] = {"hmac": "X-Webhook-Event", "github": "X-GitHub-Event"}
"""The header naming the kind of event, by scheme."""
GITHUB_SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_ID_CHARS = 200
"""A delivery id longer than this is refused (it is only ever hashed, never shown or used as a key as it is)."""


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The ``X-Webhook-Signature`` of ``body`` sent at ``timestamp`` (unix seconds) under ``secret``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def github_signature(secret: str, body: bytes) -> str:
    """GitHub's ``X-Hub-Signature-256`` of ``body`` under ``secret``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Signed:
    """What a request's headers say about its signature."""

    signature: str
    """The signature sent (``sha256=<hex>``); empty: the request is unsigned."""
    timestamp: int | None
    """When the sender signed it (``hmac``); None: not sent or not a number (``github``: never sent)."""


def read_signature(scheme: Scheme, headers: Mapping[str, str]) -> Signed:
    """The signature and timestamp of a request under ``scheme`` (``headers`` case-insensitive, as aiohttp's)."""
    if scheme == "github":
        return Signed(signature=headers.get(GITHUB_SIGNATURE_HEADER, "").strip(), timestamp=None)
    raw = headers.get(TIMESTAMP_HEADER, "").strip()
    timestamp = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 12 else None
    return Signed(signature=headers.get(SIGNATURE_HEADER, "").strip(), timestamp=timestamp)


def expected(scheme: Scheme, secret: str, body: bytes, timestamp: int | None) -> str:
    """The signature a request of ``body`` must carry under ``scheme``."""
    if scheme == "github":
        return github_signature(secret, body)
    return sign(secret, body, timestamp or 0)


def matches(sent: str, wanted: str) -> bool:
    """``sent`` is ``wanted``, compared in constant time."""
    return hmac.compare_digest(sent.encode("utf-8", "replace"), wanted.encode())
