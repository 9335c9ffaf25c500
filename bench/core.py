"""Core benchmark: throughput, per-message overhead, prompt build time vs history, parser speed.

Prints figures; asserts nothing. Run: python bench/core.py

``python bench/core.py --plugins both`` measures instead what the built-in features cost per message: the same
traffic (messages from a few users interleaved across chats, on the scripted model) through a bot without plugins
and through one with the built-in assistant's plugins that take part in runs (the loop guard, scheduled texts,
usage, limits and trust, built from core as ``bots.plugins.standard()`` builds them, every limit on and never reached), in
alternating rounds, with each one's p50 and p99 and their ratio. ``--plugins none`` or ``--plugins full`` runs one
of the two alone (to alternate whole processes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# this file is named like the package it measures: keep bench/ off the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from core import (  # noqa: E402
    InMemoryStore,
    InMemoryUsage,
    InputRef,
    Plugin,
    Price,
    ScriptedModel,
    StreamParser,
    WorkingMemory,
    context,
    create_agent,
    output,
)
from core.definitions import ContextState  # noqa: E402
from core.entries import OutputRef  # noqa: E402
from core.limits import LimitConfig, Limiter  # noqa: E402
from core.limits.plugin import Limits  # noqa: E402
from core.loop_guard import LoopGuard  # noqa: E402
from core.prompt import build_prompt  # noqa: E402
from core.schedules.plugin import ScheduledTexts  # noqa: E402
from core.trust import ActionsPolicy, Trust  # noqa: E402
from core.trust.plugin import TrustGuard  # noqa: E402
from core.usage.plugin import Usage  # noqa: E402

REPLY = '<response><reasoning>greet</reasoning><output type="m">Hello there, nice to meet you!</output></response>'


def _agent(plugins: list[Plugin] | None = None) -> tuple[Any, Any]:
    chat = context(type="chat", schema=str, key=lambda s: s)
    agent = create_agent(
        model=ScriptedModel(lambda request: REPLY, chunk_size=64),
        contexts=[chat],
        outputs=[output(type="m", handler=lambda data, ctx, agent: None)],
        memory=InMemoryStore(),
        plugins=plugins or (),
    )
    return agent, chat


NEVER = 10**9
"""A limit no traffic here reaches: every limit is checked, none refuses."""


def full_plugins() -> list[Plugin]:
    """The plugins of ``bots.plugins.standard()`` that take part in runs, in its order, built from core as the
    deployment builds them (in-memory stores; the approvals, history search and MCP plugins only bring
    definitions, and no definition of theirs is offered here)."""
    usage = InMemoryUsage()
    limits = LimitConfig(
        messages_per_minute=NEVER,
        tokens_per_day_user=NEVER,
        tokens_per_day_conversation=NEVER,
        max_input_chars=NEVER,
        admins=frozenset({"telegram:owner"}),
    )
    return [
        LoopGuard(),
        ScheduledTexts(),
        Usage(usage, prices={ScriptedModel.name: Price(input=0.15, output=0.6)}),
        Limits(Limiter(limits), usage=usage),
        TrustGuard(Trust(policy=ActionsPolicy.parse("mcp:*=admin, reminders:*=member"), owners=limits.admins)),
    ]


CHATS = 16
"""Chats the plugin comparison's traffic is interleaved across."""
USERS = 5
"""Users writing in them (each message from one, as a platform's input carries it)."""


def _message(i: int) -> tuple[str, dict[str, Any]]:
    """The ``i``-th message of the plugin comparison: its chat and the input (a Telegram user, member tier)."""
    params = {"platform": "telegram", "user_id": f"u{i % USERS}", "tier": "member"}
    return f"c{i % CHATS}", {"type": "m", "data": f"hi {i}", "params": params}


class Traffic:
    """One agent and the latencies of its messages (seconds), the messages numbered across rounds."""

    def __init__(self, name: str, plugins: list[Plugin]) -> None:
        self.name = name
        self.agent, self.chat = _agent(plugins)
        self.sent = 0
        self.crowds = 0
        self.lat: list[float] = []

    async def round(self, n: int, *, keep: bool = True) -> list[float]:
        """Send ``n`` messages one after the other; their latencies (kept in ``lat`` unless warming up)."""
        agent, chat = self.agent, self.chat
        lat: list[float] = []
        for _ in range(n):
            key, message = _message(self.sent)
            self.sent += 1
            t = time.perf_counter()
            await agent.send(chat, key, message)
            lat.append(time.perf_counter() - t)
        if keep:
            self.lat.extend(lat)
        return lat

    async def concurrently(self, chats: int) -> float:
        """Messages per second with one message in each of ``chats`` chats at once, twice (chats of their own)."""
        agent, chat = self.agent, self.chat
        self.crowds += 1
        start = time.perf_counter()
        for word in ("hi", "again"):
            await asyncio.gather(
                *(
                    agent.send(
                        chat, f"crowd{self.crowds}:{i}", {"type": "m", "data": word, "params": _message(i)[1]["params"]}
                    )
                    for i in range(chats)
                )
            )
        return 2 * chats / (time.perf_counter() - start)

    def report(self) -> str:
        return f"p50 {statistics.median(self.lat) * 1e3:.3f} ms, p99 {_pct(self.lat, 0.99) * 1e3:.3f} ms"


async def bench_plugins(which: str, *, rounds: int = 10, per_round: int = 300) -> None:
    """Per-message cost without plugins and with the full set: ``which`` is ``both`` (alternating rounds in this
    process), ``none`` or ``full``."""
    configs: dict[str, tuple[str, Callable[[], list[Plugin]]]] = {
        "none": ("no plugins", list),
        "full": ("full plugin set", full_plugins),
    }
    runs = [Traffic(name, plugins()) for key, (name, plugins) in configs.items() if which in ("both", key)]
    async with contextlib.AsyncExitStack() as stack:
        for t in runs:
            await stack.enter_async_context(t.agent)
            await t.round(200, keep=False)  # warm up
        ratios: list[float] = []
        for r in range(rounds):
            order = runs if r % 2 == 0 else runs[::-1]  # who goes first alternates
            p50: dict[str, float] = {}
            for t in order:
                gc.collect()
                p50[t.name] = statistics.median(await t.round(per_round))
            if len(runs) == 2:
                ratios.append(p50["full plugin set"] / p50["no plugins"])
        n = rounds * per_round
        for t in runs:
            print(f"{t.name}: per message over {n:,} messages ({CHATS} chats, {USERS} users): {t.report()}")
        if len(runs) == 2:
            none, full = (statistics.median(t.lat) for t in runs)
            print(
                f"full plugin set / no plugins, p50: {full / none:.2f}x "
                f"(median of {rounds} alternating rounds' ratios: {statistics.median(ratios):.2f}x, "
                f"min {min(ratios):.2f}x, max {max(ratios):.2f}x)"
            )
        rates: dict[str, list[float]] = {t.name: [] for t in runs}
        for r in range(3):
            for t in runs if r % 2 == 0 else runs[::-1]:
                gc.collect()
                rates[t.name].append(await t.concurrently(1000))
        for t in runs:
            print(
                f"{t.name}: 1,000 chats concurrently: {statistics.median(rates[t.name]):,.0f} messages/s "
                "(median of 3, alternating)"
            )


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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--plugins",
        choices=("both", "none", "full"),
        help="measure the per-message cost of the plugins instead (both: alternating rounds; none, full: one alone)",
    )
    parser.add_argument("--rounds", type=int, default=10, help="with --plugins: rounds of each (default 10)")
    parser.add_argument("--per-round", type=int, default=300, help="with --plugins: messages a round (default 300)")
    args = parser.parse_args()
    if args.plugins is not None:
        with traced():
            asyncio.run(bench_plugins(args.plugins, rounds=args.rounds, per_round=args.per_round))
        return
    with traced():
        asyncio.run(bench_send())
    bench_prompt()
    bench_parser()


if __name__ == "__main__":
    main()
