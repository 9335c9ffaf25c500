"""Settings (``REDIS_*``), the platform lease, and the package's public API."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from typing import Any

import pytest

import core.fleet
from bots.gateway import lock_names
from bots.queue_settings import RedisSettings
from bots.settings import Settings
from core.fleet import PlatformLock, QueueConfig, RedisBackend, redact_url

from .conftest import queue_config, wait_until
from .server import RedisServer


def test_redis_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in {
        "REDIS_URL": "redis://queue.internal:6380/2",
        "REDIS_INBOX_CAP": "50",
        "REDIS_LEASE_SECONDS": "12.5",
        "REDIS_WORKER_CONCURRENCY": "4",
        "REDIS_POLL_DELAY": "1",
        "REDIS_DEDUPE_TTL": "600",
        "REDIS_HANDOFF_BATCHES": "3",
        "REDIS_PASSWORD": "hunter2",
    }.items():
        monkeypatch.setenv(var, value)
    config = Settings().redis.to_config()
    assert config == QueueConfig(
        url="redis://queue.internal:6380/2",
        password="hunter2",
        inbox_cap=50,
        lease_seconds=12.5,
        concurrency=4,
        poll_delay=1.0,
        dedupe_ttl=600.0,
        handoff_batches=3,
        stop_timeout=config.stop_timeout,
        ordered_dedupe=config.ordered_dedupe,
    )
    # the platforms whose ids grow declare it (issue 52): the order of their updates is their dedupe
    assert {"schedule:", "telegram:", "discord:"} <= set(config.ordered_dedupe)
    assert "hunter2" not in repr(Settings().redis)


def test_every_redis_setting_is_described() -> None:
    for name, field in RedisSettings.model_fields.items():
        assert field.description, f"REDIS_{name.upper()} has no description"


def test_urls_are_shown_without_their_password() -> None:
    assert redact_url("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert redact_url("rediss://user:s3cret@host/1") == "rediss://user:***@host/1"
    assert redact_url("redis://host:6379/0") == "redis://host:6379/0"


def test_platform_leases_are_named_by_a_hash_of_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_TOKEN", "123:secret-token")
    [name] = lock_names(Settings())
    assert name.startswith("telegram:") and "secret" not in name and "123" not in name


async def test_one_holder_per_platform_lease(redis_server: RedisServer, client: Any) -> None:
    backend = RedisBackend(queue_config(redis_server))
    # renewed every ttl / 3 = 1 s: a stall of the event loop up to 2 s does not let the lease lapse
    first = PlatformLock(backend, "telegram:abc", ttl=3)
    second = PlatformLock(backend, "telegram:abc", ttl=3)
    await first.acquire()
    waiting = asyncio.create_task(second.acquire(poll=0.05))
    await asyncio.sleep(4)  # well past the ttl: the holder renews, the standby keeps waiting
    assert not waiting.done()
    await first.release()
    await waiting
    assert await client.get("bots:lock:telegram:abc") == second.value
    await client.delete("bots:lock:telegram:abc")  # as if it had expired while this process was away
    await wait_until(second.lost.is_set, timeout=30, what="the lost lease")
    await second.release()
    await backend.close()


def test_the_public_api_is_complete_and_importable() -> None:
    exported = list(core.fleet.__all__)
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert hasattr(core.fleet, name), name
    public = {
        name
        for name, value in vars(core.fleet).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and getattr(value, "__module__", "core.fleet").startswith("core")
        and name != "annotations"
    }
    assert public <= set(exported), public - set(exported)
    for module in (
        "arq_worker",
        "backend",
        "dispatcher",
        "drain",
        "keys",
        "lock",
        "memory_store",
        "options",
        "reply_ledger",
        "scope",
    ):
        importlib.import_module(f"core.fleet.{module}")
