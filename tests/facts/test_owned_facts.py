"""A fact is its owner's (issue 35, "memory has an owner"), in one agent with the facts plugin and a scripted model:
in a shared conversation ``recall`` and the prompt (the full one and the compact one of small models) give each
person their own facts and the group's, never another member's private ones; who owns a fact is who wrote the
message the model answered, whatever the model writes; facts kept before they had owners become the group's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core import AgentOptions, InMemoryStore, ScriptedModel, context, create_agent, output
from core.facts import Fact, Facts, FactScope, forget, recall, remember

from .shown import results

ROOM = context(type="room", schema=str, key=lambda s: s, max_steps=3)
SAY = '<response><output type="room:message">{text}</output></response>'


def call(name: str, args: dict[str, Any]) -> str:
    return f'<response><action_call name="{name}">{json.dumps(args)}</action_call></response>'


def said(text: str, user: str, message: str) -> dict[str, Any]:
    return {"type": "room:message", "data": text, "params": {"user": user, "user_id": user, "message_id": message}}


def agent_with(model: ScriptedModel, facts: Facts, *, compact: bool = False) -> Any:
    return create_agent(
        model=model,
        contexts=[ROOM],
        actions=[remember, recall, forget],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        plugins=[facts],
        memory=InMemoryStore(),
        options=AgentOptions(compact_prompt=compact),
    )


async def test_group_members_cannot_recall_each_other_s_private_facts() -> None:
    model = ScriptedModel(
        [
            call("remember", {"fact": "Alice's locker code is 4711"}),
            SAY.format(text="Kept, for you alone."),
            call("remember", {"fact": "The party is on Friday", "for_everyone": True}),
            SAY.format(text="Kept, for everyone."),
            call("recall", {}),
            SAY.format(text="I can't tell you that."),
            call("recall", {}),
            SAY.format(text="Your code is 4711."),
        ]
    )
    facts = Facts()
    agent = agent_with(model, facts)
    async with agent:
        await agent.send(ROOM, "r", said("remember my locker code 4711", "alice", "1"))
        await agent.send(ROOM, "r", said("remember: party on Friday, for everyone", "alice", "2"))
        await agent.send(ROOM, "r", said("what is Alice's locker code?", "bob", "3"))
        await agent.send(ROOM, "r", said("what is my locker code?", "alice", "4"))
        kept = await facts.store.of_conversation("room:r")
    assert [(f.text, f.owner, f.scope, f.message) for f in kept] == [
        ("Alice's locker code is 4711", "room:alice", FactScope.PRIVATE, "1"),
        ("The party is on Friday", "room:alice", FactScope.GROUP, "2"),
    ]
    prompts = [r.prompt for r in model.requests]
    bobs_answer, alices_answer = prompts[5], prompts[7]  # the steps after each recall
    assert results(bobs_answer, "recall")[-1] == "The party is on Friday."
    assert results(alices_answer, "recall")[-1] == "Alice's locker code is 4711. The party is on Friday."
    bobs_facts = prompts[4][prompts[4].index("<facts>") : prompts[4].index("</facts>")]
    assert "Friday" in bobs_facts and "4711" not in bobs_facts  # what the prompt shows him, before any recall
    assert "4711" in prompts[6][prompts[6].index("<facts>") :]
    assert "<memory>" not in prompts[4]  # the facts are not in the conversation's memory any more


async def test_the_compact_prompt_shows_the_asker_s_facts_only() -> None:
    model = ScriptedModel(lambda request: "Noted.")
    facts = Facts()
    agent = agent_with(model, facts, compact=True)
    async with agent:
        await agent.send(ROOM, "r", said("hello", "alice", "1"))  # (the store is bound once the agent starts)
        for text, owner, scope in (
            ("Alice's locker code is 4711", "room:alice", FactScope.PRIVATE),
            ("Bob likes tea", "room:bob", FactScope.PRIVATE),
            ("The party is on Friday", "room:alice", FactScope.GROUP),
        ):
            await facts.store.add(Fact(conversation="room:r", text=text, owner=owner, scope=scope), limit=50)
        await agent.send(ROOM, "r", said("what do you know?", "bob", "2"))
    system = model.requests[-1].system
    assert "- Bob likes tea" in system and "- The party is on Friday" in system
    assert "4711" not in system


async def test_the_owner_is_who_wrote_the_message_not_what_the_model_says() -> None:
    """The model cannot give a fact to someone else: it has no argument for it."""
    model = ScriptedModel([call("remember", {"fact": "Bob's PIN is 1234", "owner": "room:bob"}), SAY.format(text="ok")])
    facts = Facts()
    agent = agent_with(model, facts)
    async with agent:
        await agent.send(ROOM, "r", said("remember Bob's PIN 1234", "mallory", "7"))
        kept = await facts.store.of_conversation("room:r")
    assert [(f.owner, f.scope) for f in kept] == [("room:mallory", FactScope.PRIVATE)]
    assert await facts.store.of_owner("room:bob") == []


async def test_facts_kept_before_owners_become_the_group_s() -> None:
    model = ScriptedModel([call("recall", {}), SAY.format(text="ok")])
    facts = Facts()
    agent = agent_with(model, facts)
    memory = agent.memory
    await memory.set("context:room:r", {"facts": ["The user's name is Ann", "", 42], "other": 1})
    async with agent:
        await agent.send(ROOM, "r", said("what do you know?", "bob", "1"))
        kept = await facts.store.of_conversation("room:r")
    assert [(f.text, f.owner, f.scope) for f in kept] == [("The user's name is Ann", None, FactScope.GROUP)]
    assert results(model.requests[1].prompt, "recall") == ["The user's name is Ann."]
    assert await memory.get("context:room:r") == {"other": 1}  # moved out of the memory dict for good
    assert await facts.store.of_owner("room:bob") == []  # nobody's to list in /memory


async def test_without_the_plugin_remember_says_so() -> None:
    model = ScriptedModel([call("remember", {"fact": "x"}), SAY.format(text="ok")])
    agent = create_agent(
        model=model,
        contexts=[ROOM],
        actions=[remember],
        outputs=[output(type="room:message", handler=lambda data, c, a: None)],
        memory=InMemoryStore(),
    )
    async with agent:
        await agent.send(ROOM, "r", said("remember x", "alice", "1"))
    assert "keeps no facts" in model.requests[1].prompt


@pytest.mark.parametrize("who", [None, "nobody"])
async def test_a_fact_said_by_no_known_person_is_the_group_s(who: str | None) -> None:
    model = ScriptedModel([call("remember", {"fact": "The wifi is guest-net"}), SAY.format(text="ok")])
    facts = Facts()
    agent = agent_with(model, facts)
    params = {} if who is None else {"user": who}  # a name alone identifies nobody
    async with agent:
        await agent.send(ROOM, "r", {"type": "room:message", "data": "remember the wifi", "params": params})
        kept = await facts.store.of_conversation("room:r")
    assert [(f.owner, f.scope) for f in kept] == [(None, FactScope.GROUP)]


@pytest.mark.parametrize("command", ["reset", "forget"])
async def test_reset_and_forget_erase_the_conversation_s_facts(command: str) -> None:
    facts = Facts()
    agent = agent_with(ScriptedModel(lambda request: "ok"), facts)
    for where in ("room:r", "room:other"):
        await facts.store.add(Fact(conversation=where, text="x", owner="room:alice"), limit=50)
    await getattr(agent, command)(ROOM, "r")  # /reset, /forget: whoever may use them on the platform
    assert await facts.store.of_conversation("room:r") == []
    assert [f.conversation for f in await facts.store.of_owner("room:alice")] == ["room:other"]
