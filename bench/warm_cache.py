"""Time to the first token of an answer as a conversation grows: does the embedded model stay warm?

Two conversations (Ada's and Bob's) talk to the bot ``make run`` builds, turn by turn, interleaved: each turn of
one is followed by a turn of the other, so they share the model all along (``--together`` sends both at once).
For turns 1, 10 and 30 (``--turns``) of each it prints the time from sending the line to the first character of
the answer, and how many prompt tokens llama.cpp took from the cache and how many it evaluated. The last turn
asks each for their name: an answer naming the other person would mean the conversations mixed.

Run: ``python bench/warm_cache.py`` (the settings' model, weights where ``make run`` keeps them); prints, asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# keep bench/ off the import path (bench/core.py would shadow the core package)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from bots.app import build_agent  # noqa: E402
from bots.settings import Settings  # noqa: E402
from core import Agent, RunEventType  # noqa: E402
from extensions.terminal import cli_session, typed  # noqa: E402

__all__ = ("main",)

TOPICS = (
    "the sea",
    "mountains",
    "trains",
    "coffee",
    "winter",
    "libraries",
    "bicycles",
    "gardens",
    "music",
    "bread",
    "rivers",
    "museums",
    "stars",
    "tea",
    "markets",
    "bridges",
    "forests",
    "islands",
    "clocks",
    "maps",
    "lighthouses",
    "cheese",
    "kites",
    "rain",
    "castles",
    "owls",
    "deserts",
    "violins",
)


def lines(name: str, turns: int) -> list[str]:
    """What one person says: their name first, a short question about a topic per turn, their name asked last."""
    said = [f"Hello, my name is {name}."]
    said += [f"Tell me one short fact about {TOPICS[n % len(TOPICS)]}." for n in range(max(0, turns - 2))]
    said.append("What is my name?")
    return said[:turns]


@dataclass(kw_only=True)
class Turn:
    """One answer and what it cost."""

    number: int
    first_token: float
    total: float
    cached: int | None
    evaluated: int | None
    answer: str


async def _turn(agent: Agent, session: str, number: int, text: str) -> Turn:
    started = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    async for event in agent.stream(cli_session, session, typed(session, text), reasoning=False):
        if event.type in (RunEventType.OUTPUT_TEXT, RunEventType.OUTPUT_TEXT_DONE) and event.content:
            if first is None:
                first = time.perf_counter() - started
            if event.final:
                parts.append(str(event.content))
    total = time.perf_counter() - started
    counts = getattr(agent.model, "last_prompt_tokens", None)
    return Turn(
        number=number,
        first_token=first if first is not None else total,
        total=total,
        cached=counts[0] if counts else None,
        evaluated=counts[1] if counts else None,
        answer=" ".join(" ".join(parts).split()),
    )


def _settings(data_dir: Path) -> Settings:
    settings = Settings()
    weights_dir = settings.llm.weights_dir or settings.bot.data_dir / "models"
    return settings.model_copy(
        update={
            "bot": settings.bot.model_copy(update={"data_dir": data_dir}),
            "llm": settings.llm.model_copy(update={"weights_dir": weights_dir}),
        }
    )


def _row(who: str, turn: Turn) -> str:
    tokens = "" if turn.cached is None else f" | prompt: {turn.cached} cached, {turn.evaluated} evaluated"
    return f"{who} turn {turn.number:>2}: first token {turn.first_token:.2f} s, answer {turn.total:.2f} s{tokens}"


async def _main(args: argparse.Namespace) -> int:
    shown = sorted({int(t) for t in args.show.split(",") if t.strip()})
    turns = max(shown)
    with tempfile.TemporaryDirectory(prefix="warm-cache-") as scratch:
        agent = build_agent(_settings(Path(scratch)), platforms=["cli"])
        load = getattr(agent.model, "load", None)
        if load is not None:
            started = time.perf_counter()
            await load()
            print(f"loaded {agent.model.name} in {time.perf_counter() - started:.1f} s", flush=True)
        people = {"Ada": lines("Ada", turns), "Bob": lines("Bob", turns)}
        results: dict[str, list[Turn]] = {name: [] for name in people}
        async with agent:
            for number in range(1, turns + 1):

                async def one(name: str, number: int = number) -> None:
                    turn = await _turn(agent, f"warm-{name}", number, people[name][number - 1])
                    results[name].append(turn)
                    if number in shown:
                        print(_row(name, turn), flush=True)

                if args.together:
                    async with asyncio.TaskGroup() as tg:
                        for name in people:
                            tg.create_task(one(name))
                else:
                    for name in people:
                        await one(name)
        for name, done in results.items():
            ratio = done[-1].first_token / max(1e-9, done[0].first_token)
            warm = [t.first_token for t in done[1:]]
            print(
                f"{name}: turn {turns} / turn 1 first token = {ratio:.2f}x; median over turns 2-{turns} "
                f"{statistics.median(warm) if warm else 0:.2f} s; last answer: {done[-1].answer[:100]!r}",
                flush=True,
            )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--show", default="1,10,30", help="the turns to print (the last one is the conversation's length)"
    )
    parser.add_argument("--together", action="store_true", help="send both conversations' lines at the same time")
    options: Any = parser.parse_args(argv)
    return asyncio.run(_main(options))


if __name__ == "__main__":
    raise SystemExit(main())
