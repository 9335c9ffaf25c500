"""The embedded usage file is written off the answer's way (issue 51: a lone message answered at the speed of the
model): a call's counts wait in memory and are written a moment later with the others, so a run does not wait for
the file, reads see every count at once, and a normal stop writes what still waits."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from core import InMemoryStore, SQLiteUsage, context, create_agent, output
from core.usage import day_of
from core.usage.plugin import Usage
from tests.core.reporting_model import TOKENS_IN, TOKENS_OUT, Answers

ROOM = context(type="room", schema=str, key=lambda s: s)


def said(text: str, user: str) -> dict[str, Any]:
    return {"type": "room:message", "data": text, "params": {"user": user, "user_id": user, "message_id": text}}


def agent_with(usage: SQLiteUsage) -> Any:
    return create_agent(
        model=Answers(),
        contexts=[ROOM],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[Usage(usage)],
        memory=InMemoryStore(),
    )


def rows_in(path: Path) -> dict[str, tuple[int, int]]:
    """The file's counters of today, read by a connection of its own: input and output tokens by key."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT key, input, output FROM usage WHERE day = ?", (day_of(),)).fetchall()
    finally:
        conn.close()
    return {str(key): (int(tokens_in), int(tokens_out)) for key, tokens_in, tokens_out in rows}


async def test_a_run_does_not_wait_for_the_usage_file(tmp_path: Path) -> None:
    """Another process holds the usage file's write lock while a message is answered: the run ends at once (it
    waited for SQLite's 5 s lock timeout before, then lost the counts); once the lock is given back, the counts are
    read, written first."""
    path = tmp_path / "usage.sqlite3"
    usage = SQLiteUsage(path)
    await usage.check()  # (the file and its tables exist)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # (a writer elsewhere: the file's write lock taken)
    agent = agent_with(usage)
    async with agent:
        try:
            await asyncio.wait_for(agent.send(ROOM, "r", said("hello", "alice")), 3)
        finally:
            other.execute("ROLLBACK")
            other.close()
        totals = await usage.totals("chat:room:r", [day_of()])
        assert (totals.input_tokens, totals.output_tokens) == (TOKENS_IN, TOKENS_OUT)
        assert (await usage.totals("user:room:alice", [day_of()])).input_tokens == TOKENS_IN


async def test_the_counts_are_written_a_moment_later_and_at_the_stop(tmp_path: Path) -> None:
    """The counts of two answers wait in memory (the file has none of them yet), then are written together after
    ``write_after``; those of a third, still waiting when the agent stops, are written by the stop."""
    path = tmp_path / "usage.sqlite3"
    usage = SQLiteUsage(path, write_after=0.2)
    await usage.check()
    async with agent_with(usage) as agent:
        await agent.send(ROOM, "r", said("one", "alice"))
        await agent.send(ROOM, "r", said("two", "bob"))
        assert rows_in(path) == {}
        async with asyncio.timeout(10):
            while not rows_in(path):
                await asyncio.sleep(0.02)
        assert rows_in(path) == {
            "chat:room:r": (2 * TOKENS_IN, 2 * TOKENS_OUT),
            "model:answers": (2 * TOKENS_IN, 2 * TOKENS_OUT),
            "user:room:alice": (TOKENS_IN, TOKENS_OUT),
            "user:room:bob": (TOKENS_IN, TOKENS_OUT),
        }
        usage.write_after = 3600.0  # (the next counts are written by the stop, or not at all)
        await agent.send(ROOM, "r", said("three", "carol"))
        assert rows_in(path)["chat:room:r"] == (2 * TOKENS_IN, 2 * TOKENS_OUT)
    assert rows_in(path) == {
        "chat:room:r": (3 * TOKENS_IN, 3 * TOKENS_OUT),
        "model:answers": (3 * TOKENS_IN, 3 * TOKENS_OUT),
        "user:room:alice": (TOKENS_IN, TOKENS_OUT),
        "user:room:bob": (TOKENS_IN, TOKENS_OUT),
        "user:room:carol": (TOKENS_IN, TOKENS_OUT),
    }
