"""Core benchmark: throughput, per-message overhead, prompt build time vs history, parser speed.

Prints figures; asserts nothing. Run: python bench/core.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# this file is named like the package it measures: keep bench/ off the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from core import (  # noqa: E402
    InMemoryStore,
    InputRef,
    ScriptedModel,
    StreamParser,
    WorkingMemory,
    context,
    create_agent,
    output,
)
from core.definitions import ContextState  # noqa: E402
from core.entries import OutputRef  # noqa: E402
from core.prompt import build_prompt  # noqa: E402

REPLY = '<response><reasoning>greet</reasoning><output type="m">Hello there, nice to meet you!</output></response>'


def _agent() -> tuple[Any, Any]:
    chat = context(type="chat", schema=str, key=lambda s: s)
    agent = create_agent(
        model=ScriptedModel(lambda request: REPLY, chunk_size=64),
        contexts=[chat],
        outputs=[output(type="m", handler=lambda data, ctx, agent: None)],
        memory=InMemoryStore(),
    )
    return agent, chat


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def bench_send() -> None:
    agent, chat = _agent()
    async with agent:
        for _ in range(200):  # warm up
            await agent.send(chat, "warm", {"type": "m", "data": "hi"})
        n = 3000
        lat: list[float] = []
        start = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await agent.send(chat, "one", {"type": "m", "data": "hi"})
            lat.append(time.perf_counter() - t)
        one = n / (time.perf_counter() - start)
        print(f"agent.send, 1 context, sequential: {one:,.0f} messages/s")
        print(
            f"per-message framework overhead (zero-delay model): p50 {statistics.median(lat) * 1e3:.3f} ms, "
            f"p99 {_pct(lat, 0.99) * 1e3:.3f} ms"
        )
        contexts = 1000
        start = time.perf_counter()
        await asyncio.gather(*(agent.send(chat, f"c{i}", {"type": "m", "data": "hi"}) for i in range(contexts)))
        await asyncio.gather(*(agent.send(chat, f"c{i}", {"type": "m", "data": "again"}) for i in range(contexts)))
        many = 2 * contexts / (time.perf_counter() - start)
        print(f"agent.send, 1,000 contexts concurrently: {many:,.0f} messages/s")


def bench_prompt() -> None:
    chat = context(type="chat", schema=str, key=lambda s: s)
    out = output(type="m")
    results = {}
    for size in (10, 1_000, 100_000):
        logs: list[Any] = []
        for i in range(size):
            if i % 2:
                logs.append(OutputRef(type="m", content=f"reply number {i}", processed=True))
            else:
                logs.append(InputRef(type="m", data=f"message number {i}", processed=True))
        wm = WorkingMemory(logs, limit=size + 10)
        state = ContextState(id="chat:x", context=chat, args="x", key="x", memory={}, working_memory=wm)
        update = [InputRef(type="m", data="new")]
        times = []
        for _ in range(300):
            t = time.perf_counter()
            build_prompt(state=state, actions=[], outputs=[out], updates=update)
            times.append(time.perf_counter() - t)
        results[size] = statistics.median(times)
        print(f"prompt build with {size:>7,} history entries: median {results[size] * 1e6:.0f} us")
    print(
        f"prompt build ratio 100,000 / 1,000 entries: {results[100_000] / results[1_000]:.2f}x "
        "(flat past the window of 40 entries shown; below it the prompt simply has fewer entries)"
    )


def bench_parser() -> None:
    body = (
        "<response><reasoning>The user asks about the weather; I will call the action and answer.</reasoning>"
        '<action_call name="weather">{"city": "Paris", "units": "metric"}</action_call>'
        '<output type="discord:message" reply="1">It is sunny in Paris, 21 C. Have a <b>nice</b> day!\n'
        + "Some longer text to make the reply realistic. " * 20
        + "</output></response>"
    )
    text = body * 200
    size_mb = len(text.encode()) / 1e6
    for chunk in (16, 256):
        chunks = [text[i : i + chunk] for i in range(0, len(text), chunk)]
        runs = []
        for _ in range(5):
            parser = StreamParser()
            t = time.perf_counter()
            for c in chunks:
                parser.feed(c)
            parser.close()
            runs.append(time.perf_counter() - t)
        print(f"parser, {chunk}-char chunks: {size_mb / statistics.median(runs):.1f} MB/s")


def traced() -> contextlib.AbstractContextManager[Any]:
    """Tracing as ``bots`` sets it up when ``TRACING_ENABLED=true`` is in the environment (``bench/tracing.py``
    compares), else nothing."""
    if os.environ.get("TRACING_ENABLED", "").lower() != "true":
        return contextlib.nullcontext()
    from bots.tracing import TracingSettings, start_tracing

    return start_tracing(TracingSettings(enabled=True), role="bench")


def main() -> None:
    with traced():
        asyncio.run(bench_send())
    bench_prompt()
    bench_parser()


if __name__ == "__main__":
    main()
