"""The web chat's visitors in Redis, shared by every gateway (``extensions.web.VisitorBook``): when each visitor
was last seen, so whichever gateway sweeps takes each idle one once, and the new visitors each address started
lately, counted in one window for the whole fleet.

Keys (prefix ``bots:``)::

    bots:visitors               zset     visitor id -> when it was last seen (ms)
    bots:newcomers:<address>    zset     one member per new visitor the address started, scored by when (ms);
                                         expires a window after the last one

Each operation is one script or one command. A visitor's conversation keys (``bots:{web:chat:<id>}:...``) are
dropped by ``drop_conversation`` only while the conversation is idle: no lease, nothing waiting, no batch.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .backend import RedisBackend

__all__ = ("RedisVisitorBook",)

_IDLE = """
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #found > 0 then redis.call('ZREM', KEYS[1], unpack(found)) end
return found
"""

_NEWCOMER = """
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return 1
"""

_DROP = """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('LLEN', KEYS[2]) > 0 or redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
return 1
"""


class RedisVisitorBook:
    """The web chat's visitor book on the process's ``RedisBackend``; a Redis failure is a ``DispatchError``. What
    a page waits for (``seen``, ``newcomer``) is tried once, not retried for ``REDIS_RETRY_SECONDS``."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        register = backend.client.register_script
        self._idle = register(_IDLE)
        self._newcomer = register(_NEWCOMER)
        self._drop = register(_DROP)

    async def seen(self, visitor: str, *, at: float) -> None:
        """See ``extensions.web.VisitorBook``."""
        client, key = self.backend.client, self.backend.keys.visitors
        await self.backend.run(lambda: client.zadd(key, {visitor: int(at * 1000)}), what="noting a visit", retry_for=0)

    async def idle(self, *, before: float, limit: int) -> list[str]:
        """See ``extensions.web.VisitorBook``."""
        args = [int(before * 1000), limit]
        found = await self.backend.call(self._idle, [self.backend.keys.visitors], args, what="taking idle visitors")
        return [str(visitor) for visitor in found]

    async def newcomer(self, address: str, *, most: int, window: float, at: float) -> bool:
        """See ``extensions.web.VisitorBook``."""
        args = [int(at * 1000), int(window * 1000), most, f"{int(at * 1000)}:{secrets.token_hex(4)}"]
        keys = [self.backend.keys.newcomers(address)]
        return bool(await self.backend.call(self._newcomer, keys, args, what="counting a new visitor", retry_for=0))

    async def drop_conversation(self, cid: str) -> None:
        """See ``extensions.web.VisitorBook``: the inbox, batch and meta of ``cid`` (fence, dedupe keys), unless
        a run holds its lease or something waits."""
        keys = self.backend.keys.context(cid)
        await self.backend.call(
            self._drop, [keys.lease, keys.inbox, keys.batch, keys.meta], [], what=f"dropping the keys of {cid}"
        )

    async def close(self) -> None:
        """The backend is the process's: closed with it."""
        return None
