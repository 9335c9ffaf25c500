"""The console's login: one secret from the environment (``CONSOLE_SECRET``), compared in constant time, a signed
session cookie, and a CSRF token bound to the session on every change.

The session cookie is ``<session id>.<expiry>.<signature>``, signed with a key derived from the secret (so any
process of a fleet with the same secret accepts it, and changing the secret logs everyone out). A logged-out
session is refused until it expires, by every process of a fleet and after a restart (``bots.console.logouts``).
Login attempts take turns, at most two a second per client (its address) in the whole fleet, before the secret is
even compared, so guesses sent at once wait in line like guesses sent one by one, and someone guessing makes nobody
else wait. Refusals look the same whatever failed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

from .logouts import LocalLoginTurns, LocalLogouts, LoginTurns, Logouts

__all__ = ("LOGIN_SPACING", "SESSION_COOKIE", "Sessions", "same_secret")

SESSION_COOKIE = "console_session"
"""The session cookie's name."""
LOGIN_SPACING = 0.5
"""Seconds between two login attempts of one client at least (in the whole fleet with Redis)."""


def same_secret(given: str, expected: str) -> bool:
    """True when ``given`` is ``expected``: both hashed first, so the comparison takes the same time whatever
    their lengths, then compared in constant time."""
    left = hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest()
    right = hashlib.sha256(expected.encode("utf-8", "surrogatepass")).digest()
    return hmac.compare_digest(left, right)


class Sessions:
    """Issues and checks the operators' sessions and their CSRF tokens."""

    def __init__(
        self, secret: str, *, hours: float, logouts: Logouts | None = None, turns: LoginTurns | None = None
    ) -> None:
        self._secret = secret
        self._key = hmac.new(secret.encode(), b"bots-console-session-key", hashlib.sha256).digest()
        self.seconds = int(hours * 3600)
        """How long a session lasts."""
        self.logouts: Logouts = logouts if logouts is not None else LocalLogouts()
        """The sessions logged out (Redis in a fleet, a file under ``BOT_DATA_DIR`` in one process)."""
        self.turns: LoginTurns = turns if turns is not None else LocalLoginTurns(LOGIN_SPACING)
        """The pace of login attempts (fleet-wide in Redis)."""

    def _mac(self, purpose: str, value: str) -> str:
        digest = hmac.new(self._key, f"{purpose}|{value}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    async def login(self, given: str, *, client: str = "") -> str | None:
        """A new session's cookie value when ``given`` is the secret, else None; compared in ``client``'s turn
        (``turns``: its address), and refused uncompared when its turns are taken for too long."""
        if not await self.turns.wait(client) or not same_secret(given, self._secret):
            return None
        session = secrets.token_urlsafe(18)
        expires = int(time.time()) + self.seconds
        body = f"{session}.{expires}"
        return f"{body}.{self._mac('session', body)}"

    def signed(self, cookie: str | None) -> tuple[str, int] | None:
        """The session id and expiry a cookie carries when it is well formed, signed and unexpired; else None."""
        if not cookie or not cookie.isascii() or cookie.count(".") != 2:
            return None
        session, expires, signature = cookie.split(".")
        if not hmac.compare_digest(signature.encode(), self._mac("session", f"{session}.{expires}").encode()):
            return None
        if not expires.isdigit() or int(expires) < int(time.time()):
            return None
        return session, int(expires)

    async def session(self, cookie: str | None) -> str | None:
        """The session id a cookie carries when it is valid, signed, unexpired and not logged out; else None."""
        signed = self.signed(cookie)
        if signed is None or await self.logouts.has(signed[0]):
            return None
        return signed[0]

    async def logout(self, cookie: str | None) -> None:
        """Refuse the session of ``cookie`` from now on, until it expires."""
        signed = self.signed(cookie)
        if signed is not None:
            await self.logouts.add(signed[0], until=signed[1])

    def csrf(self, session: str) -> str:
        """The CSRF token of ``session`` (a hidden field in every form that changes something)."""
        return self._mac("csrf", session)

    def check_csrf(self, session: str, token: str | None) -> bool:
        """True when ``token`` is the session's CSRF token (constant time)."""
        return (
            token is not None and token.isascii() and hmac.compare_digest(token.encode(), self.csrf(session).encode())
        )
