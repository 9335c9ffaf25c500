"""Where the console keeps what every process must agree on about logins: the sessions logged out (refused until
they expire) and the turns of login attempts (at most ``1 / spacing`` a second, wherever they arrive).

In a fleet both live in Redis, so a logout on one gateway is refused by every other one and the attempts of all
gateways share one pace (``RedisLogouts``, ``RedisLoginTurns``)::

    <prefix>console:logout:<session id>   string   the session was logged out; expires with the session
    <prefix>console:login:next            string   when the next login attempt may be compared (ms, the server's)

In one process (``bots run``), the logouts are a small JSON file under ``BOT_DATA_DIR`` (``console_logouts.json``,
mode 0600), read once and rewritten at each logout, so they survive a restart (``LocalLogouts``); the turns are kept
in memory (``LocalLoginTurns``). Redis unreachable, a process goes on with what it knows itself: the logouts it saw
and its own turns (a warning says so).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

__all__ = (
    "MAX_WAIT",
    "LocalLoginTurns",
    "LocalLogouts",
    "LoginTurns",
    "Logouts",
    "RedisLoginTurns",
    "RedisLogouts",
)

log = logging.getLogger("bots.console")

MAX_WAIT = 30.0
"""Seconds a login attempt waits for its turn at most; past it, it is refused without being compared."""


class Logouts(Protocol):
    """The sessions logged out before they expire."""

    async def add(self, session: str, *, until: int) -> None:
        """Refuse ``session`` until ``until`` (seconds since the epoch: when it expires anyway)."""
        ...

    async def has(self, session: str) -> bool:
        """True when ``session`` was logged out."""
        ...


class LoginTurns(Protocol):
    """The pace of login attempts."""

    async def wait(self, client: str = "") -> bool:
        """Wait for this attempt's turn in ``client``'s line (its address: one guesser makes nobody else wait);
        False (at once) when its turns are taken for more than ``MAX_WAIT``."""
        ...


class LocalLogouts:
    """Logouts in this process, and in a JSON file (``{session: expiry}``) when ``path`` is given, read once."""

    def __init__(self, path: Path | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        """The file (created at the first logout, mode 0600); None: kept in memory only."""
        self._clock = clock
        self._known: dict[str, int] | None = None
        self._lock = asyncio.Lock()

    def _read(self) -> dict[str, int]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("console: the logouts in %s cannot be read (%s); starting from none", self.path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): int(v) for k, v in data.items() if isinstance(v, int | float)}

    def _write(self, known: dict[str, int]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(known, file)
        os.replace(fresh, self.path)

    async def _loaded(self) -> dict[str, int]:
        if self._known is None:
            self._known = await asyncio.to_thread(self._read)
        return self._known

    async def add(self, session: str, *, until: int) -> None:
        async with self._lock:
            now = int(self._clock())
            known = {s: e for s, e in (await self._loaded()).items() if e >= now}
            known[session] = until
            self._known = known
            await asyncio.to_thread(self._write, dict(known))

    async def has(self, session: str) -> bool:
        expiry = (await self._loaded()).get(session)
        return expiry is not None and expiry >= int(self._clock())


class RedisLogouts:
    """Logouts in Redis, seen by every process of the fleet; ``client`` is a ``redis.asyncio.Redis``."""

    def __init__(self, client: Any, *, prefix: str, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.prefix = prefix
        """The fleet's key prefix (``REDIS_PREFIX``)."""
        self._clock = clock
        self._here: dict[str, int] = {}  # (what this process logged out: still refused while Redis is away)

    def key(self, session: str) -> str:
        """The key marking ``session`` logged out."""
        return f"{self.prefix}console:logout:{session}"

    async def add(self, session: str, *, until: int) -> None:
        now = int(self._clock())
        self._here = {s: e for s, e in self._here.items() if e >= now}
        self._here[session] = until
        try:
            await self.client.set(self.key(session), "1", ex=max(1, until - now))
        except Exception as exc:
            log.warning("console: a logout could not be stored in Redis (%s): only this process refuses it", exc)

    async def has(self, session: str) -> bool:
        if self._here.get(session, -1) >= int(self._clock()):
            return True
        try:
            return bool(await self.client.exists(self.key(session)))
        except Exception as exc:
            log.warning("console: the logouts in Redis cannot be read (%s); this process's own are refused", exc)
            return False


class LocalLoginTurns:
    """One login attempt per ``spacing`` seconds per client in this process (each client waits in its own line)."""

    def __init__(self, spacing: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.spacing = spacing
        """Seconds between two attempts of one client."""
        self._clock = clock
        self._next: dict[str, float] = {}

    def reserve(self, client: str = "") -> float | None:
        """This attempt's wait in seconds, or None when it would be longer than ``MAX_WAIT``."""
        now = self._clock()
        if len(self._next) > 10_000:  # the lines of clients gone quiet
            self._next = {c: t for c, t in self._next.items() if t > now}
        slot = max(now, self._next.get(client, 0.0))
        if slot - now > MAX_WAIT:
            return None
        self._next[client] = slot + self.spacing
        return slot - now

    async def wait(self, client: str = "") -> bool:
        wait = self.reserve(client)
        if wait is None:
            return False
        await asyncio.sleep(wait)
        return True


_TURN = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local slot = math.max(ms, tonumber(redis.call('GET', KEYS[1]) or '0'))
if slot - ms > tonumber(ARGV[2]) then return -1 end
redis.call('SET', KEYS[1], slot + tonumber(ARGV[1]), 'PX', slot - ms + tonumber(ARGV[1]) + 1000)
return slot - ms
"""


class RedisLoginTurns:
    """One login attempt per ``spacing`` seconds per client in the whole fleet, paced by the Redis server's clock;
    Redis unreachable, by this process's own turns."""

    def __init__(self, client: Any, *, prefix: str, spacing: float) -> None:
        self.client = client
        self.key = f"{prefix}console:login:next"
        """The key holding the next free turn (a client's: this key, ``:`` and a digest of its address)."""
        self.spacing = spacing
        """Seconds between two attempts of one client."""
        self._script = client.register_script(_TURN)
        self._local = LocalLoginTurns(spacing)

    async def reserve(self, client: str = "") -> float | None:
        """This attempt's wait in seconds, or None when it would be longer than ``MAX_WAIT``."""
        key = f"{self.key}:{hashlib.sha256(client.encode()).hexdigest()[:16]}" if client else self.key
        try:
            waited = int(await self._script(keys=[key], args=[int(self.spacing * 1000), int(MAX_WAIT * 1000)]))
        except Exception as exc:
            log.warning("console: the login turns in Redis cannot be taken (%s); this process paces its own", exc)
            return self._local.reserve(client)
        return None if waited < 0 else waited / 1000

    async def wait(self, client: str = "") -> bool:
        wait = await self.reserve(client)
        if wait is None:
            return False
        await asyncio.sleep(wait)
        return True
