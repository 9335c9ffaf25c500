"""Tracing off costs nothing: every call answers the shared no-op at once and an input stores no trace context;
on, the W3C context round-trips through a stored input and log lines carry the trace and span ids."""

from __future__ import annotations

import io
import json
import logging

from bots.logs import configure_logging
from bots.settings import LogSettings
from bots.tracing import TracingSettings, start_tracing
from core import context, tracing
from core.entries import InputRef
from core.fleet.dispatcher import encode_entry

from .conftest import Traced

chat = context(type="test:chat", key=lambda args: str(args["id"]))


def test_off_every_call_is_the_no_op() -> None:
    assert not tracing.active() and not tracing.capture_content()
    assert tracing.span("x") is tracing.NO_SPAN
    assert tracing.start("x") is tracing.NO_SPAN
    assert tracing.current() is tracing.NO_SPAN
    assert tracing.traceparent() is None and tracing.parent_from("00-" + "1" * 32 + "-" + "2" * 16 + "-01") is None
    assert tracing.current_ids() is None
    with tracing.span("x") as span:
        assert not span.is_recording()
        span.set_attribute("a", 1)


def test_off_a_stored_input_carries_no_trace_context() -> None:
    entry = json.loads(encode_entry(chat, {"id": 1}, InputRef(type="test:in", data="hi")))
    assert "tp" not in entry


def test_disabled_settings_install_nothing() -> None:
    with start_tracing(TracingSettings(enabled=False), role="run") as provider:
        assert provider is None and not tracing.active()


def test_the_stored_context_continues_the_trace(traced: Traced) -> None:
    with tracing.span("ingest") as span:
        entry = json.loads(encode_entry(chat, {"id": 1}, InputRef(type="test:in", data="hi")))
        ids = span.get_span_context()
    parent = tracing.parent_from(entry["tp"])
    assert parent is not None
    with tracing.span("run batch", parent=parent) as run:
        assert run.get_span_context().trace_id == ids.trace_id
    [batch] = traced.named("run batch")
    assert batch.parent is not None and batch.parent.span_id == ids.span_id
    assert tracing.parent_from("garbage") is None


def test_log_lines_carry_the_trace_and_span_ids(traced: Traced) -> None:
    stream = io.StringIO()
    configure_logging(LogSettings(format="json"), stream=stream)
    try:
        with tracing.span("work") as span:
            logging.getLogger("test").warning("inside")
            found = span.get_span_context()
        logging.getLogger("test").warning("outside")
    finally:
        logging.getLogger().handlers.clear()
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert inside["trace_id"] == f"{found.trace_id:032x}" and inside["span_id"] == f"{found.span_id:016x}"
    assert "trace_id" not in outside


def test_text_log_lines_carry_the_ids(traced: Traced) -> None:
    stream = io.StringIO()
    configure_logging(LogSettings(format="text"), stream=stream)
    try:
        with tracing.span("work") as span:
            logging.getLogger("test").warning("inside")
            found = span.get_span_context()
    finally:
        logging.getLogger().handlers.clear()
    assert f"[trace={found.trace_id:032x} span={found.span_id:016x}]" in stream.getvalue()
