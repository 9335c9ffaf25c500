"""A message its author deleted leaves what the bot keeps (issue 35, ``core.deleted``), in one process: the working
memory and the SQLite history lose it, the next prompt does not show it, and a deletion that arrives while the
message's run goes on takes it out of that run (neither saved with it nor added to the history when it ends); one
still waiting for a run is never answered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from core import AgentOptions, InputRef, ModelRequest, context, create_agent, output
from core.busy import BusyPolicy
from core.deleted import FORGET_INPUT, forget_ref, split_forgets
from core.memory import Summary
from core.memory.long_memory import LongMemory
from core.memory.sqlite_history import SQLiteHistory

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=5)


class Gated:
    """Answers at once, except while ``gate`` is clear: then it writes a word and waits for it. Keeps each prompt."""

    name = "gated"
    model = "gated"
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()
        self.prompts: list[str] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.prompts.append(request.prompt)
        yield '<response><output type="say">Noted'
        self.started.set()
        await self.gate.wait()
        yield "</output></response>"


def built(tmp_path: Path, model: Gated, **options: Any) -> tuple[Any, SQLiteHistory]:
    history = SQLiteHistory(tmp_path / "history.sqlite3")
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        plugins=[LongMemory(history)],
        options=AgentOptions(**options),
    )
    return agent, history


def message(text: str, message_id: str) -> dict[str, Any]:
    return {"type": "chat:message", "data": text, "params": {"message_id": message_id, "user": "discord:1"}}


async def kept(agent: Any, history: SQLiteHistory) -> tuple[str, str]:
    """What the working memory and the history of ``chat:c`` hold, as text."""
    state = await agent.load_state(chat, "c")
    memory = " ".join(str(e.data) for e in state.working_memory.logs if isinstance(e, InputRef))
    stored = " ".join(e.text for e in await history.search("chat:c", limit=50))
    return memory, stored


async def test_a_deleted_message_leaves_the_working_memory_and_the_history(tmp_path: Path) -> None:
    model = Gated()
    agent, history = built(tmp_path, model)
    async with agent:
        await agent.send(chat, "c", message("my locker code is 4711", "m1"))
        await agent.send(chat, "c", message("the party is on Friday", "m2"))
        memory, stored = await kept(agent, history)
        assert "4711" in memory and "4711" in stored
        assert await agent.forget_messages(chat, "c", ["m1"]) == 1
        memory, stored = await kept(agent, history)
        assert "4711" not in memory and "4711" not in stored
        assert "Friday" in memory and "Friday" in stored
        await agent.send(chat, "c", message("what do you know?", "m3"))
        assert "4711" not in model.prompts[-1] and "Friday" in model.prompts[-1]
        assert await agent.forget_messages(chat, "c", ["m1"]) == 0  # gone already
    await history.close()


async def test_a_deleted_message_that_left_the_working_memory_long_ago_leaves_the_history(tmp_path: Path) -> None:
    model = Gated()
    agent, history = built(tmp_path, model)
    short = context(type="chat", schema=str, key=lambda s: s, max_working_memory=2, keep_logs=2)
    agent = create_agent(
        model=model,
        contexts=[short],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        plugins=[LongMemory(history)],
    )
    async with agent:
        await agent.send(short, "c", message("my locker code is 4711", "m1"))
        for n in range(3):
            await agent.send(short, "c", message(f"chatting {n}", f"n{n}"))
        memory, stored = await kept(agent, history)
        assert "4711" not in memory and "4711" in stored  # only the history holds it now (and the summary)
        newest = await history.search("chat:c", limit=1)
        await history.set_summary("chat:c", Summary(text="Ann's locker code is 4711.", upto=newest[0].seq), expected=0)
        assert await agent.forget_messages(short, "c", ["m1"]) == 0  # nothing in the working memory
        memory, stored = await kept(agent, history)
        assert "4711" not in stored and "chatting 2" in stored
        assert (await history.summary("chat:c")).text == ""  # it may have held the message: it went
    await history.close()


async def test_a_deletion_while_its_run_goes_on_takes_the_message_out_of_that_run(tmp_path: Path) -> None:
    model = Gated()
    agent, history = built(tmp_path, model)
    async with agent:
        model.gate.clear()
        sending = asyncio.create_task(agent.send(chat, "c", message("my locker code is 4711", "m1")))
        await asyncio.wait_for(model.started.wait(), 5)
        assert await agent.forget_messages(chat, "c", ["m1"]) == 1  # the run is answering it right now
        model.gate.set()
        await asyncio.wait_for(sending, 5)
        memory, stored = await kept(agent, history)
        assert "4711" not in memory and "4711" not in stored
        assert "Noted" in stored  # the answer stays
        await agent.send(chat, "c", message("what do you know?", "m2"))
        assert "4711" not in model.prompts[-1]
    await history.close()


async def test_a_deleted_message_still_waiting_for_a_run_is_never_answered(tmp_path: Path) -> None:
    model = Gated()
    agent, history = built(tmp_path, model, busy=BusyPolicy.COLLECT)
    async with agent:
        model.gate.clear()
        first = asyncio.create_task(agent.send(chat, "c", message("hello", "m1")))
        await asyncio.wait_for(model.started.wait(), 5)
        waiting = asyncio.create_task(agent.send(chat, "c", message("my locker code is 4711", "m2")))
        await asyncio.sleep(0.05)
        await agent.forget_messages(chat, "c", ["m2"])
        model.gate.set()
        await asyncio.wait_for(asyncio.gather(first, waiting), 5)
        assert all("4711" not in prompt for prompt in model.prompts)
        memory, stored = await kept(agent, history)
        assert "4711" not in memory and "4711" not in stored
    await history.close()


def test_a_batch_loses_its_deletions_and_the_messages_they_delete() -> None:
    said = InputRef(type="chat:message", data="4711", params={"message_id": "m1"})
    other = InputRef(type="chat:message", data="hi", params={"message_id": "m2"})
    kept_refs, gone = split_forgets([said, other, forget_ref(["m1"])])
    assert kept_refs == [other] and gone == {"m1"}
    assert forget_ref(["m2", "m1"]).type == FORGET_INPUT
