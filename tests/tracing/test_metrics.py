"""The reply-time histograms carry exemplars pointing at the trace of the run they measured (the OpenMetrics
format of /metrics shows them)."""

from __future__ import annotations

from prometheus_client import REGISTRY
from prometheus_client.openmetrics.exposition import generate_latest

from bots.metrics import observe
from core import tracing

from .conftest import Traced


def test_a_reply_time_points_at_its_trace(traced: Traced) -> None:
    with tracing.span("run") as span:
        observe("reply_seconds", "telegram:chat:99", 0.123)
        found = span.get_span_context()
    text = generate_latest(REGISTRY).decode()  # type: ignore[no-untyped-call]
    lines = [line for line in text.splitlines() if line.startswith("bots_reply_seconds_bucket") and "#" in line]
    assert any(f'trace_id="{found.trace_id:032x}"' in line for line in lines), lines
