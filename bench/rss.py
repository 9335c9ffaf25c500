"""Resident memory of one ``bots run`` process with SQLite memory, over many messages and conversations.

The bot is built as ``bots run`` builds it (``bots.app.build_agent``: SQLite memory, history and usage under a
temporary ``BOT_DATA_DIR``, the scripted model, the terminal chat's context); ``--messages`` messages (1,000,000 by
default) go round-robin over ``--conversations`` conversations (10,000), ``--concurrency`` at a time. RSS is printed
at every tenth of the way and at the end, with Python's small objects beside it (MB in live blocks and MB of the arenas
holding them: live blocks flat while the arenas grow is fragmentation, not a leak) and, with ``--tracemalloc``, every
Python allocation; the figure the README quotes is RSS at 1,000,000 over RSS at 100,000.

Prints figures; asserts nothing. Run: python bench/rss.py [--messages 1000000] [--conversations 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

# keep bench/ off the import path (bench/core.py would shadow the core package)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bots.app import build_agent  # noqa: E402
from bots.settings import Settings  # noqa: E402
from extensions.terminal import cli_session  # noqa: E402

__all__ = ("main",)


def rss_mb() -> float:
    """This process's resident set, in MB (MiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pymalloc_mb() -> tuple[float, float]:
    """Python's small objects: MB in live blocks, and MB of the arenas that hold them (``sys._debugmallocstats``).
    Live blocks flat while the arenas grow is fragmentation, not a leak."""
    with tempfile.TemporaryFile(mode="w+") as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()
    figures: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        if value and name.startswith("#"):
            figures[name.strip("# ").strip()] = int(value.strip().replace(",", ""))
    arena = 1 << 20  # CPython 3.10+: 1 MiB arenas
    return figures.get("bytes in allocated blocks", 0) / 2**20, figures.get(
        "arenas allocated current", 0
    ) * arena / 2**20


def _settings(data_dir: Path) -> Settings:
    settings = Settings()
    return settings.model_copy(
        update={
            "bot": settings.bot.model_copy(update={"data_dir": data_dir}),
            "llm": settings.llm.model_copy(update={"provider": "scripted"}),
        }
    )


async def run(
    *, messages: int, conversations: int, concurrency: int, data_dir: Path, state_cache: int | None
) -> dict[int, float]:
    """Send ``messages`` round-robin over ``conversations``; RSS (MB) at each checkpoint."""
    options: dict[str, Any] = {} if state_cache is None else {"state_cache": state_cache}
    agent = build_agent(_settings(data_dir), platforms=["cli"], **options)
    marks = sorted({messages // 10 * k for k in range(1, 11)} | {messages})
    seen: dict[int, float] = {}
    sent = 0
    started = time.perf_counter()
    print(
        f"{messages:,} messages over {conversations:,} conversations, {concurrency} at a time "
        f"(bots.app.build_agent, SQLite memory, scripted model)"
    )
    print(f"{'messages':>10} {'RSS MB':>8} {'objects MB':>11} {'arenas MB':>10} {'traced MB':>10} {'msg/s':>8}")
    async with agent:
        for mark in marks:
            while sent < mark:
                burst = min(concurrency, mark - sent)
                async with asyncio.TaskGroup() as group:
                    for n in range(sent, sent + burst):
                        group.create_task(
                            agent.send(
                                cli_session, f"s{n % conversations}", {"type": "cli:message", "data": f"hello {n}"}
                            )
                        )
                sent += burst
            seen[mark] = rss_mb()
            traced = tracemalloc.get_traced_memory()[0] / 2**20 if tracemalloc.is_tracing() else float("nan")
            live, arenas = pymalloc_mb()
            rate = sent / (time.perf_counter() - started)
            print(f"{mark:>10,} {seen[mark]:>8.1f} {live:>11.1f} {arenas:>10.1f} {traced:>10.1f} {rate:>8,.0f}")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--state-cache", type=int, default=None, help="the agent's state_cache (default: as bots run)")
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python's allocations (slower)")
    args = parser.parse_args()
    if args.tracemalloc:
        tracemalloc.start()
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        seen = asyncio.run(
            run(
                messages=args.messages,
                conversations=args.conversations,
                concurrency=args.concurrency,
                data_dir=Path(tmp),
                state_cache=args.state_cache,
            )
        )
    tenth, last = seen[min(seen)], seen[max(seen)]
    print(f"RSS after {max(seen):,}: {last:.1f} MB; after {min(seen):,}: {tenth:.1f} MB; ratio {last / tenth:.3f}")


if __name__ == "__main__":
    main()
