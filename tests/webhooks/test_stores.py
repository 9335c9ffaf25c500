"""The webhook stores keep the same promises: the store of one process (``bots run``) and the fleet's (a real
redis-server, shared by every gateway): a delivery's keys are claimed all or none and can be given back, and a
source's requests are counted over the last minute, not the clock's minute (a source at its limit at the end of one
minute is still at it at the start of the next)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.webhooks.store import MemoryWebhookStore, WebhookStore


class Clock:
    def __init__(self) -> None:
        self.now = 6_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, clock: Clock) -> AsyncIterator[WebhookStore]:
    if request.param == "memory":
        yield MemoryWebhookStore(clock=clock)
        return
    from core.fleet import QueueConfig, RedisBackend
    from core.webhooks.redis_store import RedisWebhookStore

    server: Any = request.getfixturevalue("redis_server")
    backend = RedisBackend(QueueConfig(url=server.url, retry_seconds=5.0))
    try:
        yield RedisWebhookStore(backend, clock=clock)
    finally:
        await backend.close()


async def test_a_delivery_is_claimed_all_or_none_and_can_be_given_back(store: WebhookStore) -> None:
    assert await store.claim(["ci:s:a", "ci:i:1"], 60)
    assert not await store.claim(["ci:s:b", "ci:i:1"], 60), "its id was taken"
    assert await store.claim(["ci:s:b"], 60), "the refused claim took none of its keys"
    await store.release(["ci:s:a", "ci:i:1"])
    assert await store.claim(["ci:s:a", "ci:i:1"], 60)


async def test_requests_are_counted_over_the_last_minute(store: WebhookStore, clock: Clock) -> None:
    clock.now += 50  # 50 s into a minute
    assert [await store.hit("ci", 60.0) for _ in range(2)] == [1, 2]
    assert await store.hit("other", 60.0) == 1, "each source has its own count"
    clock.now += 15  # 5 s into the next: the two of 10 s ago still count, as most of their minute is in view
    assert await store.hit("ci", 60.0) == pytest.approx(1 + 2 * 55 / 60)
    clock.now += 45  # 50 s in: a sixth of the minute before is in view
    assert await store.hit("ci", 60.0) == pytest.approx(2 + 2 * 10 / 60)
    clock.now += 130  # two minutes later: none
    assert await store.hit("ci", 60.0) == 1
