"""Usage counters in Redis, shared by every worker: one hash per day and key,
``<prefix>usage:<day>:<key>`` with fields ``in``, ``out`` and ``cost`` (millionths of a dollar), added to
with HINCRBY and kept ``USAGE_DAYS`` days (EXPIRE, set when a day's hash is made).

In a queued run (a worker's batch) a call's usage is not written at once: it is added up in the batch's scope and
the batch's acknowledgement adds it, in the same script, once per batch and key (a batch is acknowledged once, so
a batch run again after a crash counts once, and nothing is kept per call). Elsewhere a call with a ``charge`` id
is added by one script that remembers the id for two days (``<prefix>usage:charged:<id>``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import DispatchError, MemoryStoreError
from ..usage import USAGE_DAYS, UsageTotals
from .backend import RedisBackend
from .options import QueueConfig
from .scope import current_scope

__all__ = ("USAGE_TTL", "RedisUsage")

USAGE_TTL = (USAGE_DAYS + 1) * 86_400
"""Seconds a day's counters are kept."""
_TTL = USAGE_TTL
_CHARGE_TTL = 2 * 86_400
_ADD = """
if KEYS[1] ~= '' and not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[5]) then
  return 0
end
for i = 2, #KEYS do
  redis.call('HINCRBY', KEYS[i], 'in', ARGV[1])
  redis.call('HINCRBY', KEYS[i], 'out', ARGV[2])
  redis.call('HINCRBY', KEYS[i], 'cost', ARGV[3])
  redis.call('EXPIRE', KEYS[i], ARGV[4])
end
return 1
"""


class RedisUsage:
    """Tokens and cost per day and key, in Redis."""

    def __init__(self, backend: RedisBackend | QueueConfig) -> None:
        self._owns_backend = isinstance(backend, QueueConfig)
        self.backend = RedisBackend(backend) if isinstance(backend, QueueConfig) else backend
        """The connection."""
        self._script = self.backend.client.register_script(_ADD)

    def key(self, day: str, key: str) -> str:
        """The Redis key of ``key`` on ``day``."""
        return f"{self.backend.keys.prefix}usage:{day}:{key}"

    async def add(
        self,
        *,
        day: str,
        keys: Sequence[str],
        input_tokens: int,
        output_tokens: int,
        cost: int,
        charge: str | None = None,
    ) -> bool:
        """Add one call's usage under each of ``keys``: in a queued run of this backend with a ``charge`` id, with
        the batch's acknowledgement (see the module); else in one script, with a ``charge`` id only if that id was
        not added in the last two days (so a retried write or a batch run again counts once)."""
        scope = current_scope()
        if charge is not None and scope is not None and scope.backend is self.backend:
            for key in keys:
                scope.count_usage(self.key(day, key), input_tokens, output_tokens, cost)
            return True
        prefix = self.backend.keys.prefix
        charged = f"{prefix}usage:charged:{charge}" if charge is not None else ""
        rkeys = [charged, *(self.key(day, key) for key in keys)]
        args = [input_tokens, output_tokens, cost, _TTL, _CHARGE_TTL]
        try:
            added = await self.backend.call(self._script, rkeys, args, what="counting usage")
        except DispatchError as exc:
            raise MemoryStoreError(str(exc)) from exc
        return bool(added)

    async def totals(self, key: str, days: Sequence[str]) -> UsageTotals:
        """The usage under ``key`` over ``days``."""

        async def read() -> list[dict[str, str]]:
            async with self.backend.client.pipeline(transaction=False) as pipe:
                for day in days:
                    pipe.hgetall(self.key(day, key))
                result: list[dict[str, str]] = await pipe.execute()
                return result

        try:
            rows = await self.backend.run(read, what="reading usage")
        except DispatchError as exc:
            raise MemoryStoreError(str(exc)) from exc
        total = UsageTotals()
        for row in rows:
            total.add(
                UsageTotals(
                    input_tokens=int(row.get("in", 0)),
                    output_tokens=int(row.get("out", 0)),
                    cost_micros=int(row.get("cost", 0)),
                )
            )
        return total

    async def close(self) -> None:
        """Close the connection if this store opened it."""
        if self._owns_backend:
            await self.backend.close()
