"""Fixtures of the tracing tests: the SDK with an in-memory exporter, installed as ``bots`` installs it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bots.tracing import TracingSettings, start_tracing
from core import ModelRequest
from core.models.base import ModelUsage, report_usage

INPUT_TOKENS = 321
OUTPUT_TOKENS = 17


class Traced:
    """The spans exported while a test traced (``spans()`` flushes first)."""

    def __init__(self, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
        self.provider = provider
        self.exporter = exporter

    def spans(self) -> list[ReadableSpan]:
        self.provider.force_flush()
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]


StartTracing = Callable[..., Traced]


@pytest.fixture
def start_traced() -> Iterator[StartTracing]:
    """``start_traced(**TRACING_settings)``: tracing on (uninstalled at the end of the test)."""
    stack: list[Any] = []

    def start(**settings: Any) -> Traced:
        exporter = InMemorySpanExporter()
        manager = start_tracing(TracingSettings(enabled=True, **settings), role="run", exporter=exporter)
        provider = manager.__enter__()
        stack.append(manager)
        assert provider is not None
        return Traced(provider, exporter)

    yield start
    while stack:
        stack.pop().__exit__(None, None, None)


@pytest.fixture
async def traced(start_traced: StartTracing) -> AsyncIterator[Traced]:
    """Tracing on, content capture off."""
    yield start_traced()


class CountingModel:
    """Answers ``reply`` in three chunks and reports its tokens as a provider does (``report_usage``)."""

    name = "fake:counting"
    model = "counting-1"
    vision = False
    last_usage = None

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        yield '<response><output type="telegram:message">'
        yield self.reply
        report_usage(ModelUsage(input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS))
        yield "</output></response>"


def attribute_texts(spans: list[ReadableSpan]) -> list[str]:
    """Every string in the spans' attributes and their events' attributes."""
    found: list[str] = []
    for span in spans:
        values = list((span.attributes or {}).values())
        for event in span.events:
            values.extend((event.attributes or {}).values())
        for value in values:
            if isinstance(value, str):
                found.append(value)
            elif isinstance(value, tuple | list):
                found.extend(v for v in value if isinstance(v, str))
    return found
