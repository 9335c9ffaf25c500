"""The limit counters in Redis, shared by every worker (``core.limits.LimitStore``).

Keys (prefix ``bots:``)::

    bots:limits:msgs:<user>:<window>    zset     ids of the user's messages in that window, scored by the order
                                                 they were first counted (kept 2 windows)
    bots:limits:charged:<charge id>     string   a model call already charged (2 days)
    bots:limits:notice:<key>            string   the user was told about a limit; expires with the window
    bots:limits:usage:<day>:user:<user>        hash  in, out: model tokens spent answering the user that UTC day
    bots:limits:usage:<day>:conv:<context id>  hash  in, out: model tokens spent in the conversation that day
                                                     (both kept 90 days; apart from ``bots:usage:``, the /stats
                                                     counters of ``core.redis.RedisUsage``, which count the same
                                                     calls: sharing the keys counted each call twice)

Every write is one script, so a worker killed between two calls leaves no half-counted message or charge, and a batch
run again (after a crash) counts its messages and charges its model calls once: a message keeps the place it was first
given in its window (so it is decided the same way again), a charge happens only with ``SET NX`` on its id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..limits import USAGE_DAYS, Usage, now_ms

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

_CHARGE = """
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[4]) then
  return 0
end
for i = 2, #KEYS do
  redis.call('HINCRBY', KEYS[i], 'in', ARGV[1])
  redis.call('HINCRBY', KEYS[i], 'out', ARGV[2])
  redis.call('EXPIRE', KEYS[i], ARGV[3])
end
return 1
"""

_TWO_DAYS = 2 * 86_400


class RedisLimitStore:
    """``LimitStore`` on the process's ``RedisBackend``; a Redis failure is a ``DispatchError``."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        self._prefix = backend.config.prefix
        self._count = backend.client.register_script(_COUNT)
        self._charge = backend.client.register_script(_CHARGE)

    def usage_key(self, *, day: str, kind: str, who: str) -> str:
        """The hash of ``who``'s usage on ``day``; ``kind`` is ``user`` or ``conv``."""
        return f"{self._prefix}limits:usage:{day}:{kind}:{who}"

    async def count_message(self, *, user: str, message_id: str, minute: int, ttl_ms: int = 120_000) -> int:
        """See ``core.limits.LimitStore``."""
        key = f"{self._prefix}limits:msgs:{user}:{minute}"
        count = await self.backend.call(self._count, [key], [message_id, ttl_ms], what="counting a message")
        return int(count)

    async def usage(self, *, day: str, user: str, conversation: str) -> tuple[Usage, Usage]:
        """See ``core.limits.LimitStore``."""
        client = self.backend.client

        async def read() -> tuple[Usage, Usage]:
            async with client.pipeline(transaction=False) as pipe:
                pipe.hmget(self.usage_key(day=day, kind="user", who=user), "in", "out")
                pipe.hmget(self.usage_key(day=day, kind="conv", who=conversation), "in", "out")
                by_user, by_conversation = await pipe.execute()
            found = [Usage(input=int(a or 0), output=int(b or 0)) for a, b in (by_user, by_conversation)]
            return (found[0] if user else Usage()), found[1]

        result: tuple[Usage, Usage] = await self.backend.run(read, what="reading token usage")
        return result

    async def charge(
        self, *, charge_id: str, day: str, user: str, conversation: str, tokens_in: int, tokens_out: int
    ) -> bool:
        """See ``core.limits.LimitStore``."""
        keys = [
            f"{self._prefix}limits:charged:{charge_id}",
            self.usage_key(day=day, kind="conv", who=conversation),
        ]
        if user:
            keys.append(self.usage_key(day=day, kind="user", who=user))
        done = await self.backend.call(
            self._charge,
            keys,
            [tokens_in, tokens_out, USAGE_DAYS * 86_400, _TWO_DAYS],
            what="counting model tokens",
        )
        return bool(done)

    async def notice_due(self, *, key: str, until_ms: int) -> bool:
        """See ``core.limits.LimitStore``."""
        client = self.backend.client
        name = f"{self._prefix}limits:notice:{key}"

        async def set_once() -> bool:
            return bool(await client.set(name, "1", nx=True, px=max(1000, until_ms - now_ms())))

        result: bool = await self.backend.run(set_once, what="recording a limit notice")
        return result
