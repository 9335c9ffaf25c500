"""The summary shown with a conversation's state is read once and kept between runs when the conversations run in
this process alone (issue 51: one SQLite round trip less before the model is called); a fold or a reset here makes
it read again, so the model always sees the summary as it is."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from core.memory import SQLiteHistory, Summary
from core.memory.long_memory import LongMemory
from core.summary import SUMMARIZER

from .long_chat import FACT, chat, long_chat_agent, message_text

CID = "chat:room"


class Counting(SQLiteHistory):
    """A history that counts the reads of summaries for a run's prompt (not the summarizer's, after the run)."""

    reads = 0

    async def summary(self, cid: str) -> Summary:
        if sys._getframe(1).f_code is LongMemory._summary.__code__:
            type(self).reads += 1
        return await super().summary(cid)


def _summary_shown(prompt: str) -> str:
    return prompt.split("<summary>", 1)[1].split("</summary>", 1)[0] if "<summary>" in prompt else ""


async def test_the_summary_is_read_once_and_again_after_each_fold_and_reset(tmp_path: Path) -> None:
    history = Counting(tmp_path / "h.sqlite3")
    agent, scripted = long_chat_agent(history=history, every=5, keep=5)
    summarizer = agent.provided(SUMMARIZER)
    assert summarizer is not None
    async with agent:
        Counting.reads = 0
        for n in range(1, 4):  # nothing folded yet: read at the first run only
            await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
        assert Counting.reads == 1
        for n in range(4, 13):
            await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
            await summarizer.idle()
        assert summarizer.folds > 0
        folded = (await history.summary(CID)).text
        assert FACT in folded
        await agent.send(chat, "room", {"type": "chat:message", "data": "what do you know?"})
        answers = [r for r in scripted.requests if r.metadata.get("purpose") != "summary"]
        assert _summary_shown(answers[-1].prompt + answers[-1].system) == folded  # the newest fold, not the first read

        await summarizer.idle()
        await agent.reset(chat, "room")
        await agent.send(chat, "room", {"type": "chat:message", "data": "hello again"})
        answers = [r for r in scripted.requests if r.metadata.get("purpose") != "summary"]
        assert _summary_shown(answers[-1].prompt + answers[-1].system) == ""  # the reset's empty summary
        reads = Counting.reads
        await agent.send(chat, "room", {"type": "chat:message", "data": "and again"})
        assert Counting.reads == reads  # kept


class _Host:
    """What ``LongMemory.attach`` reads of its host."""

    def __init__(self, *, distributed: bool) -> None:
        self.distributed = distributed
        self.provided: dict[Any, Any] = {}

    def provide(self, slot: Any, value: Any) -> None:
        self.provided[slot] = value


class _State:
    def __init__(self) -> None:
        self.id = CID
        self.sections: dict[str, Any] = {}


async def test_with_a_queue_shared_with_other_processes_the_summary_is_read_at_every_run(tmp_path: Path) -> None:
    """Another worker may fold the conversation's summary between two of its runs here."""
    history = Counting(tmp_path / "h.sqlite3")
    for distributed, reads in ((True, 3), (False, 1)):
        plugin = LongMemory(history)
        plugin.attach(_Host(distributed=distributed))  # type: ignore[arg-type]
        Counting.reads = 0
        for _ in range(3):
            await plugin.loaded(_State())  # type: ignore[arg-type]
        assert Counting.reads == reads
    await history.close()
