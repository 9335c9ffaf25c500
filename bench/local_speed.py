"""How fast the embedded model answers, alone and with several people at once, on this machine's cores.

The bot is built as ``make run`` builds it (the settings' model, the terminal chat's platform, a fresh
``BOT_DATA_DIR``, the weights where ``make run`` keeps them, with their warm cache) and made ready as the bot makes it (``open_model``:
loaded, then warmed with the first conversation's prompts). Each conversation says ``LINES`` one after the other,
each line waiting for the answer to the one before, as a person does: a greeting, a sum (a tool), a question
answered from what the model knows, thanks.

- **one**: the conversations one after another, alone on the model;
- **four at once** (``--chats``): as many conversations started together, so their lines interleave and the
  model serves them side by side.

Printed per run: the median (p50) and p90 seconds from a line sent to its whole answer, the lines answered (a
non-empty answer, no error), the prompt tokens the model evaluated (not taken from its cache), the tokens it wrote
per tool call (what the grammar and the call's prefilled start leave it) and, for the four,
the ratio of their p50 to the single one's. Then the cold first answer (the first line of the first conversation
after the bot is ready) beside a warm one (the same kind of line in a later conversation, its slot new as well).
The runs alternate (one, four, one, four...); ``--runs`` (3). The sampling is greedy (temperature 0, a fixed
seed), so the answers are the same from run to run and only the timings move: another process on the cores moves
them, a machine shared with others more.

Run: ``python bench/local_speed.py`` (``--runs 3``, ``--chats 4``, ``--threads 2``, ``--show``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# keep bench/ off the import path (bench/core.py would shadow the core package)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from bots.app import build_agent  # noqa: E402
from bots.models import local_weights, open_model, weights_folder  # noqa: E402
from bots.settings import Settings  # noqa: E402
from core import Agent, RunEventType  # noqa: E402
from extensions.terminal import cli_session, typed  # noqa: E402

__all__ = ("LINES", "Line", "main", "percentile")

NAMES = ("Ada", "Ben", "Chloe", "Dev", "Emma", "Farid", "Gus", "Hana")
LINES = (
    "Hi, I'm {name}. How are you today?",
    "What is {a} times {b}?",
    "Name one country in {region}.",
    "Thanks, that's all.",
)
"""What each conversation says, in order (``{name}``, ``{a}``, ``{b}`` and ``{region}`` differ per conversation)."""
REGIONS = ("South America", "Africa", "Asia", "Europe", "Oceania", "Central America", "Scandinavia", "the Caribbean")


@dataclass(frozen=True)
class Line:
    """One line of a conversation and how it went."""

    chat: int
    index: int
    text: str
    answer: str
    seconds: float

    @property
    def answered(self) -> bool:
        return bool(self.answer.strip()) and "[error]" not in self.answer


def percentile(values: Sequence[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (nearest rank); 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def lines_of(chat: int) -> list[str]:
    fill = {"name": NAMES[chat % len(NAMES)], "a": 12 + chat, "b": 7 + 2 * chat, "region": REGIONS[chat % len(REGIONS)]}
    return [line.format(**fill) for line in LINES]


async def _say(agent: Agent, session: str, text: str) -> str:
    parts: list[str] = []
    async for event in agent.stream(cli_session, session, typed(session, text), reasoning=False):
        if event.type == RunEventType.OUTPUT_TEXT_DONE and event.content is not None:
            parts.append(str(event.content))
        elif event.type == RunEventType.ERROR:
            parts.append(f"[error] {event.content}")
    return "\n".join(parts)


async def conversation(agent: Agent, chat: int, tag: str, *, show: bool) -> list[Line]:
    """Chat ``chat``'s lines one after the other in a conversation of its own."""
    done: list[Line] = []
    for index, text in enumerate(lines_of(chat)):
        started = time.perf_counter()
        answer = await _say(agent, f"speed-{tag}-{chat}", text)
        done.append(Line(chat, index, text, answer, time.perf_counter() - started))
        if show:
            print(f"  [{tag} chat {chat}] {text!r} -> {answer[:100]!r} ({done[-1].seconds:.1f}s)", flush=True)
    return done


async def one_at_a_time(agent: Agent, chats: range, tag: str, *, show: bool) -> list[Line]:
    lines: list[Line] = []
    for chat in chats:
        lines += await conversation(agent, chat, tag, show=show)
    return lines


async def at_once(agent: Agent, chats: range, tag: str, *, show: bool) -> list[Line]:
    results = await asyncio.gather(*(conversation(agent, chat, tag, show=show) for chat in chats))
    return [line for lines in results for line in lines]


def describe(name: str, lines: Sequence[Line]) -> str:
    seconds = [line.seconds for line in lines if line.answered]
    return (
        f"{name}: p50 {percentile(seconds, 0.5):.1f} s, p90 {percentile(seconds, 0.9):.1f} s per answered line"
        f" | {sum(line.answered for line in lines)}/{len(lines)} lines answered"
    )


@dataclass
class Counts:
    """Tokens llama.cpp handled for the embedded model's requests since the last ``reset``: the figures the machine's
    load does not move."""

    evaluated: int = 0
    """Prompt tokens evaluated (not taken from a slot's cache): each request's ``timings.prompt_n`` added up."""
    calls: int = 0
    """Tool calls written (requests with ``tools``)."""
    call_tokens: int = 0
    """Tokens the model wrote for those calls (``timings.predicted_n``): what a prompt's prefill leaves it."""

    def reset(self) -> None:
        self.evaluated = self.calls = self.call_tokens = 0

    def per_call(self) -> str:
        return f"{self.call_tokens / self.calls:.1f}" if self.calls else "-"


class _CountingServer:
    """Stands between an embedded model and its llama.cpp server, adding up ``Counts`` from every request's chunks."""

    def __init__(self, server: Any, counts: Counts) -> None:
        self._server = server
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    def handle_chat_completions(self, body: dict[str, Any], on_chunk: Callable[[Any], bool]) -> None:
        counts = self._counts
        if body.get("tools"):
            counts.calls += 1

        def counted(chunk: Any) -> bool:
            timings = chunk.get("timings") if isinstance(chunk, dict) else None
            if isinstance(timings, dict):
                counts.evaluated += int(timings.get("prompt_n") or 0)
                if body.get("tools"):
                    counts.call_tokens += int(timings.get("predicted_n") or 0)
            return on_chunk(chunk)

        self._server.handle_chat_completions(body, counted)


def _count(model: object) -> Counts:
    """``Counts`` of ``model``'s requests from now on (an embedded model once loaded; always 0 for another)."""
    counts = Counts()
    server = getattr(model, "_server", None)
    if server is not None:
        model._server = _CountingServer(server, counts)  # type: ignore[attr-defined]
    return counts


async def _main(opts: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="local-speed-") as scratch:
        settings = Settings()
        # where the bot keeps the weights (LLM_WEIGHTS_DIR, else the per-user folder), with its warm cache
        weights, _ = local_weights(settings.llm, settings.bot.data_dir)
        weights_dir = weights_folder(settings.llm, settings.bot.data_dir, weights.filename)
        # a shared machine may take long over a tool's decision and call (its answer comes whole): a minute's
        # silence is not a failure here, the seconds per line say how long it took
        llm = {
            "weights_dir": weights_dir,
            "temperature": 0.0,
            "slots": max(settings.llm.slots, opts.chats),
            "timeout": max(settings.llm.timeout, 600.0),
        }
        if opts.threads:
            llm["threads"] = opts.threads
        settings = settings.model_copy(
            update={
                "bot": settings.bot.model_copy(update={"data_dir": Path(scratch)}),
                "llm": settings.llm.model_copy(update=llm),
            }
        )
        agent = build_agent(settings, platforms=["cli"])
        model = agent.model
        if hasattr(model, "seed"):
            model.seed = 7
        started = time.perf_counter()
        await open_model(model, agent)
        print(f"{model!r}: ready in {time.perf_counter() - started:.1f} s", flush=True)
        counts = _count(model)
        singles: list[float] = []
        fours: list[float] = []
        cold: list[float] = []
        warm: list[float] = []
        async with agent:
            for run in range(opts.runs):
                base = run * (opts.chats * 2)
                counts.reset()
                alone = await one_at_a_time(agent, range(base, base + opts.chats), f"one{run}", show=opts.show)
                tokens_one, per_call_one = counts.evaluated, counts.per_call()
                counts.reset()
                together = await at_once(
                    agent, range(base + opts.chats, base + 2 * opts.chats), f"four{run}", show=opts.show
                )
                tokens_four, per_call_four = counts.evaluated, counts.per_call()
                if run == 0:
                    cold.append(alone[0].seconds)
                warm += [line.seconds for line in alone if line.index == 0 and line is not alone[0]]
                p50_one = percentile([line.seconds for line in alone if line.answered], 0.5)
                p50_four = percentile([line.seconds for line in together if line.answered], 0.5)
                singles.append(p50_one)
                fours.append(p50_four)
                print(
                    describe(f"run {run + 1}, one conversation at a time", alone)
                    + f" | {tokens_one} prompt tokens | {per_call_one} tokens written per tool call",
                    flush=True,
                )
                print(
                    describe(f"run {run + 1}, {opts.chats} at once", together)
                    + f" | {tokens_four} prompt tokens | {per_call_four} tokens written per tool call"
                    + f" | {p50_four / max(p50_one, 1e-9):.2f}x the single p50",
                    flush=True,
                )
        one, four = statistics.median(singles), statistics.median(fours)
        print(
            f"median of {opts.runs} runs: one {one:.1f} s, {opts.chats} at once {four:.1f} s per line"
            f" ({four / max(one, 1e-9):.2f}x); cold first answer {cold[0]:.1f} s, warm first answers median "
            f"{statistics.median(warm) if warm else 0.0:.1f} s",
            flush=True,
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--chats", type=int, default=4, help="conversations at once")
    parser.add_argument("--threads", type=int, default=0, help="LLM_THREADS (0: the settings')")
    parser.add_argument("--show", action="store_true", help="print every answer")
    return asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
