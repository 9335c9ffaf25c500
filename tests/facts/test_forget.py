"""``forget``: a person has their own facts forgotten when they ask, the ones their words name (or all of theirs),
never someone else's; the model's words alone do not choose the fact."""

from __future__ import annotations

import pytest

from core import ScriptedModel
from core.facts import Fact, Facts, FactScope
from core.facts.model import about_words, matches

from .shown import results
from .test_owned_facts import ROOM, SAY, agent_with, call, said


@pytest.mark.parametrize(
    ("about", "message", "words"),
    [
        ("my sister", "Forget that my sister is Ana.", ["sister"]),
        # the embedded model wrote the result it had just read: the person's own words choose the fact
        ("Kept for later: You are a vegetarian.", "Forget that my sister is Ana.", ["sister", "ana"]),
        ("everything", "Forget everything you know about me.", ["everything"]),
        ("that", "Forget it.", []),
    ],
)
def test_what_to_forget_is_the_words_the_person_said(about: str, message: str, words: list[str]) -> None:
    assert about_words(about, message) == words


def test_a_fact_is_forgotten_when_it_holds_every_word() -> None:
    assert matches("Ana is my sister.", ["sisters", "ana"]) and matches("I like tea.", ["everything"])
    assert not matches("Ana is my sister.", ["sister", "bob"]) and not matches("Ana is my sister.", [])


async def test_a_person_forgets_their_own_facts_and_never_someone_else_s() -> None:
    model = ScriptedModel(
        [
            call("forget", {"about": "Kept for later: You are a vegetarian."}),
            SAY.format(text="ok"),
            call("forget", {"about": "my code"}),
            SAY.format(text="ok"),
            call("forget", {"about": "everything"}),
            SAY.format(text="ok"),
        ]
    )
    facts = Facts()
    agent = agent_with(model, facts)
    async with agent:
        for text, owner in (
            ("Ana is my sister.", "room:alice"),
            ("I am a vegetarian.", "room:alice"),
            ("My code is 4711", "room:alice"),
            ("My code is 1234", "room:bob"),
        ):
            await facts.store.add(
                Fact(conversation="room:r", text=text, owner=owner, scope=FactScope.PRIVATE), limit=50
            )
        await agent.send(ROOM, "r", said("Forget that my sister is Ana.", "alice", "1"))
        after_alice = [f.text for f in await facts.store.of_conversation("room:r")]
        await agent.send(ROOM, "r", said("Forget my code.", "bob", "2"))
        after_bob = [f.text for f in await facts.store.of_conversation("room:r")]
        await agent.send(ROOM, "r", said("Forget everything you know about me.", "alice", "3"))
        left = [(f.text, f.owner) for f in await facts.store.of_conversation("room:r")]
    assert after_alice == ["I am a vegetarian.", "My code is 4711", "My code is 1234"]
    assert after_bob == ["I am a vegetarian.", "My code is 4711"], "his code, not hers"
    assert left == []
    prompts = [r.prompt for r in model.requests]
    assert results(prompts[1], "forget")[-1] == "Forgotten for good: Ana is your sister."
    assert results(prompts[3], "forget")[-1] == "Forgotten for good: Your code is 1234."
    assert results(prompts[5], "forget")[-1] == "Forgotten for good: You are a vegetarian. Your code is 4711."
