"""The OTLP/HTTP exporter as ``TRACING_ENABLED`` sets it up, against a real receiver on loopback that decodes the
protobuf payload: the batches arrive, with the resource and the spans' attributes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bots.tracing import TracingSettings, start_tracing
from core import tracing

from .receiver import OtlpReceiver


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    async with OtlpReceiver() as found:
        yield found


async def test_the_exporters_batches_arrive(receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    manager = start_tracing(TracingSettings(enabled=True), role="worker")
    manager.__enter__()
    try:
        for i in range(10):
            with tracing.span("work", kind="internal") as span:
                span.set_attribute("bots.n", i)
        await receiver.wait_for(lambda spans: len(spans) == 10)
    finally:
        await asyncio.to_thread(manager.__exit__, None, None, None)  # (the exporter's thread posts to this loop)
    assert receiver.batches >= 3  # at most 4 spans a batch
    assert sorted(s.attributes["bots.n"] for s in receiver.spans) == list(range(10))
    assert {s.resource["service.name"] for s in receiver.spans} == {"bots-worker"}
    assert {s.resource["bots.role"] for s in receiver.spans} == {"worker"}
    assert not tracing.active()
