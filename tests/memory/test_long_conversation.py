"""5,000 messages in one conversation (embedded: SQLite): the prompt stays the size it had at 100, the
summary keeps a fact told in the first 100, and a question about message 10 is answered through
``search_history``."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core import ModelRequest, SQLiteStore
from core.memory import SQLiteHistory
from core.summary import SUMMARIZER

from .long_chat import FACT, QUESTION, chat, long_chat_agent, message_text, replies

BURST = 50


def chat_prompts(requests: list[ModelRequest]) -> list[ModelRequest]:
    return [r for r in requests if r.metadata.get("purpose") != "summary"]


async def test_five_thousand_messages(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "memory.sqlite3")
    agent, model = long_chat_agent(history=history, memory=SQLiteStore(tmp_path / "memory.sqlite3"))
    replies.clear()
    sizes: dict[int, int] = {}
    async with agent:
        for start in range(1, 5001, BURST):  # a burst joins one run: one answer per 50 messages
            await asyncio.gather(
                *(
                    agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
                    for n in range(start, start + BURST)
                )
            )
            sent = start + BURST - 1
            if sent in (100, 5000):
                assert agent.provided(SUMMARIZER) is not None
                await agent.provided(SUMMARIZER).idle()
                await agent.send(chat, "room", {"type": "chat:message", "data": "how are you?"})
                sizes[sent] = len(chat_prompts(model.requests)[-1].prompt)
        assert agent.provided(SUMMARIZER) is not None
        await agent.provided(SUMMARIZER).idle()
        summary = await history.summary("chat:room")
        assert FACT in summary.text
        assert await history.count("chat:room") > 5000

        before = len(model.requests)
        await agent.send(chat, "room", {"type": "chat:message", "data": QUESTION})
        asked = chat_prompts(model.requests[before:])
        assert "message 000010" not in asked[0].prompt  # long gone from the window
        assert f"<summary>{summary.text}</summary>" in asked[0].prompt
        assert '<action_result name="search_history"' in asked[1].prompt
        assert replies[-1] == "You told me the code ALPHA-ZULU-10."

    assert abs(sizes[5000] - sizes[100]) <= 0.1 * sizes[100], sizes
    summaries = [r for r in model.requests if r.metadata.get("purpose") == "summary"]
    assert len(summaries) < 10_000 / 20  # one call per batch of 20 entries, not per message
