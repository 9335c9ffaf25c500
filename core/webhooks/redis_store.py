"""The fleet's ``WebhookStore``: deliveries claimed and requests counted in Redis, shared by every gateway.

Keys (prefix ``bots:``)::

    bots:webhook:seen:<source>:<digest>    string   a claimed delivery (its signature's or its id's SHA-256), TTL
    bots:webhook:rate:<source>:<window>    counter  requests of a source in one window, TTL two windows

The names of sources are the operator's (checked at start: letters, digits, ``-`` and ``_``); what a request
sends only ever appears hashed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ..fleet.backend import RedisBackend
from .store import sliding

__all__ = ("RedisWebhookStore",)

CLAIM = """
-- KEYS: the delivery's keys      ARGV: ttl ms
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then return 0 end
end
for _, key in ipairs(KEYS) do redis.call('SET', key, '1', 'PX', ARGV[1]) end
return 1
"""

HIT = """
-- KEYS: the window's counter, the window before's      ARGV: ttl ms
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, tonumber(redis.call('GET', KEYS[2]) or '0')}
"""


class RedisWebhookStore:
    """A ``WebhookStore`` in the fleet's Redis (``backend``); keys are named under its prefix."""

    def __init__(self, backend: RedisBackend, *, clock: Callable[[], float] = time.time) -> None:
        self.backend = backend
        self._clock = clock
        self._claim: Any = backend.client.register_script(CLAIM)
        self._hit: Any = backend.client.register_script(HIT)
        self._keys = backend.keys

    async def claim(self, keys: Sequence[str], ttl: float) -> bool:
        b = self.backend
        named = [self._keys.webhook_seen(k) for k in keys]
        taken = await b.call(self._claim, named, [max(1, int(ttl * 1000))], what="claiming a webhook delivery")
        return bool(int(taken))

    async def keep(self, keys: Sequence[str], ttl: float) -> None:
        named = [self._keys.webhook_seen(k) for k in keys]
        ms = max(1, int(ttl * 1000))

        async def extend() -> None:
            async with self.backend.client.pipeline(transaction=True) as pipe:
                for key in named:
                    pipe.pexpire(key, ms)
                await pipe.execute()

        await self.backend.run(extend, what="keeping a webhook delivery")

    async def release(self, keys: Sequence[str]) -> None:
        named = [self._keys.webhook_seen(k) for k in keys]
        await self.backend.run(lambda: self.backend.client.delete(*named), what="releasing a webhook delivery")

    async def hit(self, key: str, window: float) -> float:
        now = self._clock()  # (the gateways' clocks: a second apart moves a second of one window to the next)
        slot = int(now // window)
        counters = [self._keys.webhook_rate(key, slot), self._keys.webhook_rate(key, slot - 1)]
        count, before = await self.backend.call(
            self._hit, counters, [max(1, int(2 * window * 1000))], what="counting a webhook request"
        )
        return sliding(int(count), int(before), now, window)
