"""5,000 messages in one conversation through two Redis workers with the history in PostgreSQL, one of
them killed midway: every message is kept once, the summary keeps a fact from the first 100, the
prompt size stays flat, and a question about message 10 is answered through ``search_history``."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from core.fleet import RedisBackend, RedisDispatcher, RedisMemoryStore
from core.memory.postgres import PostgresHistory
from tests.memory.long_chat import FACT, QUESTION, chat, long_chat_agent, message_text

from .conftest import ROOT, queue_config, wait_until
from .server import RedisServer

CID = "chat:room"
BURST = 500
PROBE = "how are you?"


async def users_stored(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (
            await conn.execute("SELECT count(*) FROM history WHERE cid = %s AND role = 'user'", (CID,))
        ).fetchone()
        return int(row[0]) if row else 0


async def stored_report(url: str, said: int) -> str:
    """What the history holds against what was sent: its count of user messages and the texts stored twice."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        twice = await (
            await conn.execute(
                "SELECT text, array_agg(id) FROM history WHERE cid = %s AND role = 'user' GROUP BY text "
                "HAVING count(*) > 1 LIMIT 10",
                (CID,),
            )
        ).fetchall()
    return f"sent {said}, stored {await users_stored(url)}, stored twice: {twice}"


@pytest.fixture
def two_workers(
    redis_server: RedisServer, database_url: str, tmp_path: Path
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two ``tests.fleet.long_worker`` processes; they write the probe's prompt sizes to ``tmp_path/sizes``."""
    (tmp_path / "sizes").touch()
    procs = []
    for n in range(2):
        args = ["--url", redis_server.url, "--database-url", database_url, "--sizes", str(tmp_path / "sizes")]
        with (tmp_path / f"worker-{n}.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tests.fleet.long_worker", *args],
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


async def test_five_thousand_messages_two_workers_one_killed(
    redis_server: RedisServer, database_url: str, tmp_path: Path, two_workers: list[subprocess.Popen[bytes]]
) -> None:
    sizes = tmp_path / "sizes"
    backend = RedisBackend(queue_config(redis_server, inbox_cap=100_000))
    history = PostgresHistory(database_url)
    gateway, _ = long_chat_agent(history=history, memory=RedisMemoryStore(backend), dispatcher=RedisDispatcher(backend))
    said = 0  # user messages sent so far

    def message(n: int) -> dict[str, str]:
        return {"type": "chat:message", "data": message_text(n)}

    last = ""

    async def send(text: str) -> None:
        nonlocal said, last
        said += 1
        last = text
        await gateway.send(chat, "room", {"type": "chat:message", "data": text})

    async def answered() -> bool:  # the last message stored, and the answer to its batch after it
        newest = await history.search(CID, limit=2)
        return len(newest) == 2 and newest[0].role == "assistant" and newest[1].text == last

    async def all_stored() -> bool:
        return await users_stored(database_url) == said

    async def settled() -> bool:  # and the summary caught up
        current = await history.summary(CID)
        return await answered() and not await history.pending(CID, after=current.upto, keep=40, limit=50)

    async def probe() -> int:
        for n in range(15):  # the window then holds the same kind of entries at every probe
            await send(f"just chatting {said} {n}")
            await wait_until(answered, timeout=20, what="a single message answered")
        before = len(sizes.read_text().split())
        await send(f"{PROBE} ({said})")
        await wait_until(lambda: len(sizes.read_text().split()) > before, timeout=20, what="the probe answered")
        return int(sizes.read_text().split()[-1])

    t0 = time.monotonic()
    try:
        async with gateway:
            measured: dict[int, int] = {}
            for n in range(1, 101):
                await send(message_text(n))
            await wait_until(settled, timeout=30, what="the first 100 messages answered and summarized")
            measured[100] = await probe()
            victim = None
            print("T100", time.monotonic() - t0)
            for start in range(101, 5001, BURST):  # a burst is stored concurrently, in any order
                said += len(burst := range(start, min(5001, start + BURST)))
                await asyncio.gather(*(gateway.send(chat, "room", message(n)) for n in burst))
                if start > 2500 and victim is None:  # the worker running the conversation, mid-batch or mid-fold
                    running = int((tmp_path / "runs").read_text().split()[-1])
                    victim = next(p for p in two_workers if p.pid == running)
                    victim.send_signal(signal.SIGKILL)
                    victim.wait()
            print("Tsent", time.monotonic() - t0)
            await wait_until(all_stored, timeout=60, what="5,000 messages stored")
            last = (await history.search(CID, words="message", limit=1))[0].text  # the one stored last
            # (a bound for a hang: the survivor answers the killed worker's batch after its lease, on a busy machine
            # in more than 60 s once)
            await wait_until(settled, timeout=180, what="5,000 messages answered and summarized")
            print("Tsettled", time.monotonic() - t0)
            measured[5000] = await probe()
            print("Tprobe", time.monotonic() - t0)

            summary = await history.summary(CID)
            assert FACT in summary.text
            assert victim is not None
            survivor = next(p for p in two_workers if p is not victim)
            assert int((tmp_path / "runs").read_text().split()[-1]) == survivor.pid  # it took over
            try:  # each once, the killed worker's too (the probes' last ones may still be on their way)
                await wait_until(all_stored, timeout=20, what="every message stored")
            except AssertionError:
                raise AssertionError(await stored_report(database_url, said)) from None

            await send(QUESTION)
            await wait_until(answered, timeout=20, what="the question answered")
            reply = (await history.search(CID, limit=1))[0]
            assert reply.text == "You told me the code ALPHA-ZULU-10."
        assert abs(measured[5000] - measured[100]) <= 0.1 * measured[100], measured
    finally:
        await history.close()
        await backend.close()
