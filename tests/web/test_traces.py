"""The console's conversation page lists the conversation's recent runs with their trace ids, linked to the
operator's trace viewer (``TRACING_UI_URL``); with tracing off nothing is kept and nothing shown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from bots.console.data import conversation_of
from bots.tracing import TracingSettings, start_tracing
from core.run_traces import recent_runs, traces_key
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot, client, login, scripted, until

VIEWER = "http://127.0.0.1:16686/trace/{trace_id}?q=<b>&x=1"
CID = "telegram:chat:4242"


@pytest.fixture
def trace_ids() -> Iterator[Callable[[], set[str]]]:
    """Tracing on for the test, spans kept in memory; yields what gives the ids of the traces exported so far."""
    exporter = InMemorySpanExporter()
    with start_tracing(TracingSettings(enabled=True), role="run", exporter=exporter) as provider:
        assert provider is not None

        def exported() -> set[str]:
            provider.force_flush()
            return {f"{span.context.trace_id:032x}" for span in exporter.get_finished_spans()}

        yield exported


async def test_the_conversation_page_links_each_run_to_its_trace(
    start_bot: StartBot, telegram: FakeTelegramServer, trace_ids: Callable[[], set[str]]
) -> None:
    bot = await start_bot(
        scripted("traced answer"),
        platforms=["telegram", "web"],
        telegram={"token": telegram.token, "api_url": telegram.api_url, "poll_timeout": 10},
        tracing={"enabled": True, "ui_url": VIEWER},
    )
    telegram.user_says("hello there", user_id=4242)
    await telegram.wait_replies(1)

    async def kept() -> bool:  # the reply is posted before the run's end is recorded
        return bool(await recent_runs(bot.agent.memory, CID))

    await until(kept)
    [run] = await recent_runs(bot.agent.memory, CID)
    assert len(run.trace_id) == 32 and run.steps >= 1
    assert run.trace_id in trace_ids()  # the id of the trace the run's spans were exported in

    async with client() as session:
        await login(session, bot)
        async with session.get(bot.console_url + f"conversation?cid={quote(CID)}") as response:
            html = await response.text()
    link = f"http://127.0.0.1:16686/trace/{run.trace_id}?q=&lt;b&gt;&amp;x=1"  # escaped in the attribute
    assert f'<a class="trace" href="{link}"' in html
    assert "<b>" not in html

    known = conversation_of(bot.agent, CID)
    assert known is not None
    await bot.agent.forget(*known)  # forgetting the conversation forgets its runs' traces too
    assert await bot.agent.memory.get(traces_key(CID)) is None


async def test_with_tracing_off_nothing_is_kept_or_shown(start_bot: StartBot, telegram: FakeTelegramServer) -> None:
    bot = await start_bot(
        scripted("untraced answer"),
        platforms=["telegram", "web"],
        telegram={"token": telegram.token, "api_url": telegram.api_url, "poll_timeout": 10},
        tracing={"ui_url": VIEWER},
    )
    telegram.user_says("hello there", user_id=4242)
    await telegram.wait_replies(1)
    await bot.agent.stop()  # the run is over, its memory saved
    assert await bot.agent.memory.get(traces_key(CID)) is None
    async with client() as session:
        await login(session, bot)
        async with session.get(bot.console_url + f"conversation?cid={quote(CID)}") as response:
            html = await response.text()
    assert "hello there" in html and "Recent runs" not in html and "16686" not in html


def test_the_viewer_address_must_be_http_and_name_the_trace() -> None:
    assert TracingSettings(ui_url=" http://jaeger:16686/trace/{trace_id} ").trace_link("ab") == (
        "http://jaeger:16686/trace/ab"
    )
    assert TracingSettings().trace_link("ab") is None
    for bad in ("javascript:alert(1)//{trace_id}", "http://jaeger:16686/trace/"):
        with pytest.raises(ValidationError, match="TRACING_UI_URL"):
            TracingSettings(ui_url=bad)
