"""Memory benchmark: one conversation of 100,000 messages.

- prompt size and build time at 10 / 1,000 / 100,000 messages (through the agent, embedded: SQLite);
- search_history p50 / p99 over 100,000 messages, SQLite (FTS5) and PostgreSQL (GIN), a mix of common and
  rare words, two words, a date range;
- resident memory after 100,000 messages in one conversation;
- bytes stored per message (history, index and summary included).

Prints figures; asserts nothing. Run: python bench/memory.py [--messages 100000] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# bench/ holds a file named like the project's package (core.py): keep it off the import path, the project on it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import ModelRequest, SQLiteStore  # noqa: E402
from core.memory import HistoryEntry, HistoryStore, SQLiteHistory  # noqa: E402
from core.prompt import build_prompt  # noqa: E402
from core.summary import SUMMARIZER  # noqa: E402
from tests.memory.long_chat import brain, chat, long_chat_agent  # noqa: E402

CID = "chat:room"
DAY = 86_400_000
START = 1_700_000_000_000


def vocabulary(size: int = 5000) -> list[str]:
    """Made-up words, the same on every run."""
    rng = random.Random(1)
    syllables = ["ka", "lo", "mi", "ter", "san", "du", "vel", "or", "pi", "nex", "ra", "tu", "bel", "gon", "si"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


WORDS = vocabulary()
_WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]  # Zipf: a few words everywhere, most rare


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, weights=_WEIGHTS, k=rng.randint(6, 16)))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def conversation(folder: Path, total: int) -> None:
    """``total`` messages through the embedded agent; prompt figures at the checkpoints, RSS at the end."""
    history = SQLiteHistory(folder / "memory.sqlite3")
    sizes: list[int] = []

    def model(request: ModelRequest) -> str:
        if request.metadata.get("purpose") != "summary":
            sizes.append(len(request.prompt))
        return brain(request)

    agent, scripted = long_chat_agent(
        history=history, memory=SQLiteStore(folder / "memory.sqlite3"), every=50, keep=40, answer=model
    )
    rng = random.Random(2)
    checkpoints = [c for c in (10, 1000, 100_000) if c <= total] + ([total] if total not in (10, 1000, 100_000) else [])
    sent = 0
    started = time.perf_counter()
    print(f"one conversation, {total:,} messages through the agent (embedded: SQLite, summary every 50 entries)")
    print(f"{'messages':>10} {'prompt chars':>13} {'build ms':>9} {'summary chars':>14} {'RSS MB':>7}")
    async with agent:
        assert agent.provided(SUMMARIZER) is not None
        for checkpoint in checkpoints:
            while sent < checkpoint:
                burst = min(checkpoint - sent, 1 if sent < 10 else 500)
                await asyncio.gather(
                    *(agent.send(chat, "room", {"type": "chat:message", "data": sentence(rng)}) for _ in range(burst))
                )
                sent += burst
                scripted.requests.clear()  # the scripted model keeps every request: not the bot's memory
            await agent.provided(SUMMARIZER).idle()
            await agent.send(chat, "room", {"type": "chat:message", "data": "how are you?"})
            state = await agent.load_state(chat, "room")
            actions, outputs = agent.available(state)
            timings = []
            for _ in range(200):
                t = time.perf_counter()
                build_prompt(state=state, actions=actions, outputs=outputs, updates=[])
                timings.append(time.perf_counter() - t)
            summary = await history.summary(CID)
            print(
                f"{checkpoint:>10,} {sizes[-1]:>13,} {statistics.median(timings) * 1000:>9.3f} "
                f"{len(summary.text):>14,} {rss_mb():>7.1f}"
            )
        elapsed = time.perf_counter() - started
        count = await history.count(CID)
    print(f"  {total:,} messages in {elapsed:.1f}s ({total / elapsed:,.0f}/s); {count:,} history entries")
    print(
        f"  resident memory after {total:,} messages: {rss_mb():.1f} MB (peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MB)"
    )
    with sqlite3.connect(folder / "memory.sqlite3") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    print(
        f"  SQLite file: {pages / 1e6:.1f} MB, {pages / count:.0f} bytes per stored message (text ~{_avg_text():.0f} chars)"
    )


def _avg_text() -> float:
    rng = random.Random(3)
    return statistics.mean(len(sentence(rng)) for _ in range(2000))


def queries(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """A mix: a common word, a rare word, two words, a word in a date range, a date range alone."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        kind = i % 5
        common = WORDS[rng.randint(0, 20)]
        rare = WORDS[rng.randint(1000, len(WORDS) - 1)]
        day = START + rng.randint(0, 90) * DAY
        if kind == 0:
            out.append({"words": common})
        elif kind == 1:
            out.append({"words": rare})
        elif kind == 2:
            out.append({"words": f"{common} {WORDS[rng.randint(20, 500)]}"})
        elif kind == 3:
            out.append({"words": WORDS[rng.randint(0, 200)], "since": day, "until": day + 7 * DAY})
        else:
            out.append({"since": day, "until": day + DAY})
    return out


async def fill(store: HistoryStore, total: int) -> None:
    rng = random.Random(4)
    step = 90 * DAY // total  # three months of conversation
    for start in range(0, total, 1000):
        await store.append(
            CID,
            [
                HistoryEntry(id=f"m{n}", ts=START + n * step, role="user", who=f"user{n % 7}", text=sentence(rng))
                for n in range(start, min(total, start + 1000))
            ],
        )


async def search(store: HistoryStore, name: str, total: int, *, analyze: str = "") -> None:
    t = time.perf_counter()
    await fill(store, total)
    filled = time.perf_counter() - t
    if analyze:  # what autovacuum does within a minute of a bulk load: the planner needs the statistics
        import psycopg

        async with await psycopg.AsyncConnection.connect(analyze, autocommit=True) as conn:
            await conn.execute("ANALYZE history")
    rng = random.Random(5)
    timings: dict[str, list[float]] = {}
    for q in queries(rng, 500):
        kind = "range" if "words" not in q else ("words+range" if "since" in q else "words")
        t = time.perf_counter()
        await store.search(CID, limit=5, **q)
        timings.setdefault(kind, []).append(time.perf_counter() - t)
    every = [v for vs in timings.values() for v in vs]
    detail = ", ".join(f"{k} p50 {pct(v, 0.5) * 1000:.2f}" for k, v in timings.items())
    print(
        f"{name:>10}: search_history over {total:,} messages: p50 {pct(every, 0.5) * 1000:.2f} ms, "
        f"p99 {pct(every, 0.99) * 1000:.2f} ms ({detail}); stored in {filled:.1f}s"
    )


async def postgres_bytes(url: str, total: int) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute("SELECT pg_total_relation_size('history')")).fetchone()
    assert row is not None
    print(f"  PostgreSQL: history table with its indexes {row[0] / 1e6:.1f} MB, {row[0] / total:.0f} bytes per message")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--search-only", action="store_true", help="skip the conversation through the agent")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.search_only:
            await conversation(Path(tmp) / "agent", args.messages)
            print()
        sqlite = SQLiteHistory(Path(tmp) / "search.sqlite3")
        await search(sqlite, "SQLite", args.messages)
        await sqlite.close()
    if args.no_postgres:
        return
    try:
        from tests.postgres_server import PostgresServer, pg_bin

        pg_bin("initdb")
    except (ImportError, RuntimeError) as exc:
        print(f"PostgreSQL skipped: {exc}")
        return
    from core.memory.postgres import PostgresHistory

    server = PostgresServer()
    try:
        server.start()
        url = server.create_database()
        pg = PostgresHistory(url)
        await search(pg, "PostgreSQL", args.messages, analyze=url)
        await pg.close()
        await postgres_bytes(url, args.messages)
    finally:
        server.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
