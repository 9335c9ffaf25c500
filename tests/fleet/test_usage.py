"""Usage counters in a real Redis: every process adds to the same counters, a charge id counts once."""

from __future__ import annotations

import asyncio

from core.fleet import RedisUsage
from core.usage import USAGE_DAYS

from .conftest import queue_config
from .server import RedisServer


async def test_two_stores_add_to_the_same_counters_and_a_charge_counts_once(redis_server: RedisServer) -> None:
    one, two = RedisUsage(queue_config(redis_server)), RedisUsage(queue_config(redis_server))
    try:
        day = "2026-11-23"
        keys = ["user:telegram:1", "chat:telegram:chat:1", "model:m"]
        added = await asyncio.gather(
            *(
                store.add(day=day, keys=keys, input_tokens=10, output_tokens=2, cost=7, charge=f"batch#{n % 5}:1")
                for n, store in enumerate([one, two] * 5)
            )
        )
        assert sum(added) == 5  # ten writes, five charge ids
        await two.add(day=day, keys=keys[:1], input_tokens=1, output_tokens=1, cost=1)
        totals = await one.totals("user:telegram:1", [day, "2026-11-22"])
        assert (totals.input_tokens, totals.output_tokens, totals.cost_micros) == (51, 11, 36)
        chat = await two.totals("chat:telegram:chat:1", [day])
        assert (chat.input_tokens, chat.cost_micros) == (50, 35)
        ttl = await one.backend.client.ttl(one.key(day, "model:m"))
        assert USAGE_DAYS * 86_400 < ttl <= (USAGE_DAYS + 1) * 86_400
    finally:
        await one.close()
        await two.close()
