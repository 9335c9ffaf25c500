"""The rolling summary: folded after the answer, one call per batch, a failure keeps the old summary and
is tried again after the next run; ``reset`` drops the summary and keeps the history, ``forget`` erases
both; the retention sweep removes old history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from core import ModelError, ModelRequest
from core.entries import now_ms
from core.memory import HistoryEntry, SQLiteHistory, Summary
from core.memory.recording import RetentionSweeper
from core.summary import SUMMARIZER, LocalSummaryLock

from .long_chat import FACT, brain, chat, long_chat_agent, message_text

CID = "chat:room"


async def test_a_failed_summary_keeps_the_old_one_and_is_tried_after_the_next_run(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "h.sqlite3")
    failing = {"on": False}

    def model(request: ModelRequest) -> str:
        if request.metadata.get("purpose") == "summary" and failing["on"]:
            raise ModelError("the summary model is down")
        return brain(request)

    agent, scripted = long_chat_agent(history=history, every=10, keep=10, answer=model)
    assert agent.provided(SUMMARIZER) is not None
    async with agent:
        for n in range(1, 16):
            await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
        await agent.provided(SUMMARIZER).idle()
        first = await history.summary(CID)
        assert FACT in first.text and first.upto > 0

        failing["on"] = True
        for n in range(16, 40):
            await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
            await agent.provided(SUMMARIZER).idle()
        assert await history.summary(CID) == first  # kept, nothing lost
        assert agent.provided(SUMMARIZER).failures > 0

        failing["on"] = False
        await agent.send(chat, "room", {"type": "chat:message", "data": "back again"})
        await agent.provided(SUMMARIZER).idle()
        caught_up = await history.summary(CID)
        assert caught_up.upto > first.upto and FACT in caught_up.text
        assert await history.pending(CID, after=caught_up.upto, keep=10, limit=10) == []
    summaries = [r for r in scripted.requests if r.metadata.get("purpose") == "summary"]
    assert all("Summary so far" in r.prompt for r in summaries)


async def test_a_fold_in_flight_never_holds_an_answer_back(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "h.sqlite3")
    gate = asyncio.Event()
    calls: list[str] = []
    agent, scripted = long_chat_agent(history=history, every=2, keep=2)
    assert agent.provided(SUMMARIZER) is not None
    original = scripted.stream

    async def stream(request: ModelRequest) -> AsyncIterator[str]:
        calls.append(request.metadata.get("purpose", "answer"))
        if calls[-1] == "summary":
            await gate.wait()
        async for chunk in original(request):
            yield chunk

    scripted.stream = stream  # type: ignore[method-assign]
    async with agent:
        for n in range(1, 4):
            await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
        async with asyncio.timeout(10):
            while "summary" not in calls:  # started after the second answer: waiting at the gate
                await asyncio.sleep(0.01)
        await agent.send(chat, "room", {"type": "chat:message", "data": "answered while the fold waits"})
        assert calls[-1] == "answer" and calls.count("summary") == 1  # one fold at a time
        gate.set()
        await agent.provided(SUMMARIZER).idle()
    assert FACT not in (await history.summary(CID)).text  # message 7 was never sent here
    assert (await history.summary(CID)).upto > 0


async def test_one_fold_at_a_time_per_conversation() -> None:
    lock = LocalSummaryLock()
    async with lock.hold("a") as first, lock.hold("a") as second, lock.hold("b") as other:
        assert (first, second, other) == (True, False, True)
    async with lock.hold("a") as again:
        assert again


async def test_a_fold_that_finds_the_lock_taken_looks_again_until_the_hold_ends(tmp_path: Path) -> None:
    # another process holds the conversation's lock when the runs end (a worker killed mid-fold, whose hold
    # only expires): the entries are folded once it is free, without waiting for the next message
    history = SQLiteHistory(tmp_path / "h.sqlite3")
    lock = LocalSummaryLock(ttl=5.0)
    agent, _ = long_chat_agent(history=history, every=5, keep=5, lock=lock)
    assert agent.provided(SUMMARIZER) is not None
    async with agent:
        async with lock.hold(CID) as other:
            assert other
            for n in range(1, 13):
                await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
            await asyncio.sleep(0.2)
            assert (await history.summary(CID)).upto == 0  # not folded while the other holds it
        async with asyncio.timeout(5):
            await agent.provided(SUMMARIZER).idle()
        assert FACT in (await history.summary(CID)).text

        async with lock.hold(CID):  # held for longer than a hold may last: the holder folds, this one gives up
            lock.ttl = 0.2
            for n in range(13, 25):
                await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
            async with asyncio.timeout(5):
                await agent.provided(SUMMARIZER).idle()
    await history.close()


async def test_reset_drops_the_summary_and_forget_erases_the_history(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "h.sqlite3")
    agent, _ = long_chat_agent(history=history, every=5, keep=5)
    assert agent.provided(SUMMARIZER) is not None
    async with agent:
        for n in range(1, 13):
            await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
        await agent.provided(SUMMARIZER).idle()
        assert FACT in (await history.summary(CID)).text
        stored = await history.count(CID)

        await agent.reset(chat, "room")
        assert (await history.summary(CID)).text == ""
        assert await history.count(CID) == stored  # still searchable
        await agent.send(chat, "room", {"type": "chat:message", "data": "hello again"})
        await agent.provided(SUMMARIZER).idle()
        assert FACT not in (await history.summary(CID)).text  # what was before the reset is not folded again

        await agent.forget(chat, "room")
        assert await history.count(CID) == 0 and await history.summary(CID) == Summary()
        assert await agent.memory.get(f"working:{CID}") is None


async def test_retention_removes_old_history(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "h.sqlite3")
    now = now_ms()
    old = [HistoryEntry(id=f"o{n}", ts=now - 40 * 86_400_000, role="user", who="ada", text="old") for n in range(3)]
    await history.append(CID, [*old, HistoryEntry(id="new", ts=now, role="user", who="ada", text="new")])
    assert await RetentionSweeper(history, days=0).sweep() == 0  # 0 keeps forever
    sweeper = RetentionSweeper(history, days=30, every=3600)
    await sweeper.start()
    try:
        for _ in range(200):
            if sweeper.removed:
                break
            await asyncio.sleep(0.01)
    finally:
        await sweeper.stop()
    assert sweeper.removed == 3 and [e.text for e in await history.search(CID)] == ["new"]
    await history.close()
