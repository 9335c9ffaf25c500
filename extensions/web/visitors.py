"""Who is talking: a visitor is a random id in a cookie signed with HMAC-SHA256, so nobody can claim another's.

The cookie is ``<id>.<signature>``; ``Signer.visitor(cookie)`` returns the id only when the signature matches
(compared in constant time). The key is ``WEB_SECRET``, or one generated once and kept in a file (mode 0600) in the
bot's data folder. The page's CSRF token is derived from the same key and the visitor id.

Anyone who reaches the page gets an id: a visitor is a stranger, whose messages carry the ``guest`` tier unless the
operator raises it (``WEB_VISITOR_TIER``) or names the visitor (``visitor_tier``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from core.trust import Tier

from ..chat.trust import TrustRules

__all__ = ("COOKIE", "Signer", "cookie_name", "load_secret", "new_visitor_id", "visitor_tier")

COOKIE = "visitor"
"""The cookie's name (over HTTPS, with the ``__Host-`` prefix: ``cookie_name``)."""


def cookie_name(name: str, *, secure: bool) -> str:
    """``name`` as the cookie is called: with the ``__Host-`` prefix when it is sent over HTTPS only (``secure``),
    so the browser keeps it for this host alone, set over HTTPS with ``Path=/`` and no ``Domain``: a sibling
    subdomain or a page on plain http cannot plant or overwrite it."""
    return f"__Host-{name}" if secure else name


MIN_SECRET = 32
"""Characters a secret has at least."""


def new_visitor_id() -> str:
    """A fresh visitor id: 22 URL-safe characters (128 random bits)."""
    return secrets.token_urlsafe(16)


def visitor_tier(rules: TrustRules, visitor: str, *, default: Tier) -> Tier:
    """The tier of ``visitor``'s messages: the owner's when ``BOT_ADMIN_USERS`` lists ``web:<visitor>``, a
    member's when ``TRUST_MEMBER_USERS`` does, else ``default`` (``WEB_VISITOR_TIER``: ``guest`` unless raised)."""
    who = f"web:{visitor}"
    if who in rules.owners:
        return Tier.OWNER
    if who in rules.member_users and not default.at_least(Tier.MEMBER):
        return Tier.MEMBER
    return default


def load_secret(path: Path) -> bytes:
    """The key kept in ``path``, created (64 random bytes, hex, mode 0600) when missing."""
    try:
        text = path.read_text(encoding="ascii").strip()
        if len(text) >= MIN_SECRET:
            return text.encode()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = secrets.token_hex(64)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as file:
        file.write(text + "\n")
    return text.encode()


class Signer:
    """Signs and checks visitor cookies and CSRF tokens with one key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_SECRET:
            raise ValueError(f"the signing key must have {MIN_SECRET} characters or more")
        self._key = key

    def _mac(self, purpose: str, value: str) -> str:
        digest = hmac.new(self._key, f"{purpose}|{value}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def cookie(self, visitor: str) -> str:
        """The cookie value naming ``visitor``."""
        return f"{visitor}.{self._mac('visitor', visitor)}"

    def visitor(self, cookie: str | None) -> str | None:
        """The visitor a cookie names, or None when it is missing, malformed or not signed by this key."""
        if not cookie or not cookie.isascii() or cookie.count(".") != 1:
            return None
        visitor, signature = cookie.split(".")
        if not visitor or len(visitor) > 64:
            return None
        if not hmac.compare_digest(signature.encode(), self._mac("visitor", visitor).encode()):
            return None
        return visitor

    def csrf(self, subject: str) -> str:
        """The CSRF token of ``subject`` (a visitor, an operator's session)."""
        return self._mac("csrf", subject)

    def check_csrf(self, subject: str, token: str | None) -> bool:
        """True when ``token`` is ``subject``'s CSRF token (constant time)."""
        return (
            token is not None and token.isascii() and hmac.compare_digest(token.encode(), self.csrf(subject).encode())
        )
