"""The limit counters in Redis, shared by every worker (``core.limits.LimitStore``).

Keys (prefix ``bots:``)::

    bots:limits:msgs:<user>:<window>    zset     ids of the user's messages in that window, scored by the order
                                                 they were first counted (kept 2 windows)
    bots:limits:notice:<key>            string   the user was told about a limit; expires with the window

The tokens of the per-day limits are not counted here: the limits read ``bots:usage:<day>:user:<user>`` and
``bots:usage:<day>:chat:<context id>``, the counters of ``core.fleet.RedisUsage`` (the agent's usage store).

Counting a message is one script, so a worker killed between two calls leaves no half-counted message, and a batch
run again (after a crash) counts its messages once: a message keeps the place it was first given in its window (so
it is decided the same way again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..entries import now_ms

if TYPE_CHECKING:
    from .backend import RedisBackend

__all__ = ("RedisLimitStore",)

_COUNT = """
local place = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not place then
  place = redis.call('ZCARD', KEYS[1]) + 1
  redis.call('ZADD', KEYS[1], place, ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return tonumber(place)
"""


class RedisLimitStore:
    """``LimitStore`` on the process's ``RedisBackend``; a Redis failure is a ``DispatchError``."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        self._prefix = backend.config.prefix
        self._count = backend.client.register_script(_COUNT)

    async def count_message(self, *, user: str, message_id: str, minute: int, ttl_ms: int = 120_000) -> int:
        """See ``core.limits.LimitStore``."""
        key = f"{self._prefix}limits:msgs:{user}:{minute}"
        count = await self.backend.call(self._count, [key], [message_id, ttl_ms], what="counting a message")
        return int(count)

    async def notice_due(self, *, key: str, until_ms: int) -> bool:
        """See ``core.limits.LimitStore``."""
        client = self.backend.client
        name = f"{self._prefix}limits:notice:{key}"

        async def set_once() -> bool:
            return bool(await client.set(name, "1", nx=True, px=max(1000, until_ms - now_ms())))

        result: bool = await self.backend.run(set_once, what="recording a limit notice")
        return result
