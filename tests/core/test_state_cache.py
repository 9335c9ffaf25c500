"""The working memories kept loaded between runs are bounded by conversations and by entries in all: a process
with many long conversations keeps a bounded amount of them loaded, however long they grow."""

from __future__ import annotations

from core import InMemoryStore, ScriptedModel, context, create_agent, output
from core.state_store import StateStore

chat = context(type="chat", schema=str, key=lambda s: s)
REPLY = '<response><output type="say">ok</output></response>'


def cached(states: StateStore) -> dict[str, int]:
    """The contexts whose working memory is kept loaded, with its entries."""
    return {cid: len(working.logs) for cid, (working, _) in states._working.items()}


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
