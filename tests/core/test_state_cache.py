"""The working memories kept loaded between runs are bounded by conversations and by entries in all: a process
with many long conversations keeps a bounded amount of them loaded, however long they grow."""

from __future__ import annotations

from typing import Any

from core import InMemoryStore, ScriptedModel, context, create_agent, output
from core.state_store import StateStore

chat = context(type="chat", schema=str, key=lambda s: s)
REPLY = '<response><output type="say">ok</output></response>'


def cached(states: StateStore) -> dict[str, int]:
    """The contexts whose working memory is kept loaded, with its entries."""
    return {cid: len(kept.working.logs) for cid, kept in states._working.items()}


async def test_past_its_entries_the_cache_lets_the_least_recent_conversations_go_and_they_load_again() -> None:
    agent = create_agent(
        model=ScriptedModel(lambda request: REPLY),
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        memory=InMemoryStore(),
    )
    agent.states.cache_entries = 20
    a, c = agent.context_id(chat, "a"), agent.context_id(chat, "c")
    async with agent:
        for n in range(6):  # an input and an output a message: 12 entries each in the end
            for room in "abc":
                await agent.send(chat, room, {"type": "say", "data": f"{room}{n}"})
        assert cached(agent.states) == {c: 12}  # b's 12 more would pass 20
        await agent.send(chat, "a", {"type": "say", "data": "a6"})  # read from the store: nothing was lost
        assert cached(agent.states) == {a: 14}
        assert agent.states._entries == 14
        state = await agent.load_state(chat, "a")
        assert [log.data for log in state.working_memory.logs if log.kind == "input"] == [f"a{n}" for n in range(7)]


class CountingStore(InMemoryStore):
    """An in-memory store that counts the reads of each kind of key (``context``, ``working``...)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: dict[str, int] = {}

    async def get(self, key: str) -> Any | None:
        kind = key.partition(":")[0]
        self.reads[kind] = self.reads.get(kind, 0) + 1
        return await super().get(key)


async def test_a_conversation_kept_loaded_is_not_read_back_from_the_store_before_its_next_answer() -> None:
    memory = CountingStore()
    agent = create_agent(
        model=ScriptedModel(lambda request: REPLY),
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        memory=memory,
    )
    kinds = ("context", "shape", "working", "statelog")
    async with agent:
        await agent.send(chat, "a", {"type": "say", "data": "one"})
        first = {kind: memory.reads.get(kind, 0) for kind in kinds}
        assert first["context"] == first["working"] == first["statelog"] == 1  # a new conversation: read once
        await agent.send(chat, "a", {"type": "say", "data": "two"})
        # the memory, its shape, the working memory and the state log as the last run saved them
        assert {kind: memory.reads.get(kind, 0) for kind in kinds} == first
        agent.states.uncache(agent.context_id(chat, "a"))  # (what a run that failed half way does: read again)
        await agent.send(chat, "a", {"type": "say", "data": "three"})
        assert memory.reads["context"] == memory.reads["working"] == memory.reads["statelog"] == 2
        state = await agent.load_state(chat, "a")
        assert [log.data for log in state.working_memory.logs if log.kind == "input"] == ["one", "two", "three"]
        assert memory.reads["statelog"] == 2  # (kept loaded after the third)
