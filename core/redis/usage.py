"""Usage counters in Redis, shared by every worker: one hash per day and key,
``<prefix>usage:<day>:<key>`` with fields ``in``, ``out`` and ``cost`` (millionths of a dollar), added to
with HINCRBY in one MULTI and kept ``USAGE_DAYS`` days (EXPIRE)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import DispatchError, MemoryStoreError
from ..usage import USAGE_DAYS, UsageTotals
from .backend import RedisBackend
from .config import QueueConfig

__all__ = ("RedisUsage",)

_TTL = (USAGE_DAYS + 1) * 86_400


class RedisUsage:
    """Tokens and cost per day and key, in Redis."""

    def __init__(self, backend: RedisBackend | QueueConfig) -> None:
        self._owns_backend = isinstance(backend, QueueConfig)
        self.backend = RedisBackend(backend) if isinstance(backend, QueueConfig) else backend
        """The connection."""

    def key(self, day: str, key: str) -> str:
        """The Redis key of ``key`` on ``day``."""
        return f"{self.backend.keys.prefix}usage:{day}:{key}"

    async def add(self, *, day: str, keys: Sequence[str], input_tokens: int, output_tokens: int, cost: int) -> None:
        """Add one call's usage under each of ``keys`` (one transaction)."""

        async def write() -> None:
            async with self.backend.client.pipeline(transaction=True) as pipe:
                for key in keys:
                    rkey = self.key(day, key)
                    pipe.hincrby(rkey, "in", input_tokens)
                    pipe.hincrby(rkey, "out", output_tokens)
                    pipe.hincrby(rkey, "cost", cost)
                    pipe.expire(rkey, _TTL)
                await pipe.execute()

        try:
            await self.backend.run(write, what="counting usage")
        except DispatchError as exc:
            raise MemoryStoreError(str(exc)) from exc

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
