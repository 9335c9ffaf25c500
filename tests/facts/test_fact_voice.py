"""A fact is kept in its owner's words and told to its owner in the second person ("Ana is my sister." is shown
as "Ana is your sister." while the model answers its owner: the embedded model, shown "my", answered "I remember
that you are Ana's sister."); to anyone else it is shown as said."""

from __future__ import annotations

from typing import Any

import pytest

from core import ScriptedModel
from core.facts import Fact, Facts, FactScope, recall, remember
from core.facts.voice import as_told, second_person

from .shown import NOTHING, results
from .test_owned_facts import ROOM, SAY, agent_with, call, said


@pytest.mark.parametrize(
    ("said_as", "told"),
    [
        ("Ana is my sister.", "Ana is your sister."),
        ("I am vegetarian and my cat is Tom.", "You are vegetarian and your cat is Tom."),
        ("The user's name is Ada", "Your name is Ada"),
        ("The user is 30 years old.", "You are 30 years old."),
        ("I’m allergic to nuts; I was born in May.", "You’re allergic to nuts; you were born in May."),
        ("Call me Al. I like tea, it's mine.", "Call you Al. You like tea, it's yours."),
        ("Ana said I has a cat", "Ana said you have a cat"),
        ("Mimi is a good name for a cat.", "Mimi is a good name for a cat."),  # (no "I" inside a word)
    ],
)
def test_a_fact_in_the_first_person_is_turned_to_the_second(said_as: str, told: str) -> None:
    assert second_person(said_as) == told


def test_a_fact_is_turned_only_for_its_owner_asking_alone() -> None:
    fact = Fact(conversation="room:r", text="My code is 4711", owner="room:alice", scope=FactScope.GROUP)
    assert as_told(fact, ["room:alice"]) == "Your code is 4711"
    assert as_told(fact, ["room:bob"]) == "My code is 4711"  # (Alice's, for everyone: "your" would be Bob's)
    assert as_told(fact, ["room:alice", "room:bob"]) == "My code is 4711"
    assert as_told(fact.model_copy(update={"owner": None}), []) == "My code is 4711"


async def test_remember_recall_and_the_prompt_tell_the_owner_their_fact_and_keep_their_words() -> None:
    model = ScriptedModel(
        [
            call("remember", {"fact": "Ana is my sister."}),
            SAY.format(text="Kept."),
            call("recall", {}),
            SAY.format(text="Ana is your sister."),
            call("recall", {}),
            SAY.format(text="Nothing."),
        ]
    )
    facts = Facts()
    agent: Any = agent_with(model, facts)
    async with agent:
        await agent.send(ROOM, "r", said("Remember that my sister is called Ana.", "alice", "1"))
        await agent.send(ROOM, "r", said("What do you remember about me?", "alice", "2"))
        await agent.send(ROOM, "r", said("What do you remember about Alice?", "bob", "3"))
        kept = await facts.store.of_conversation("room:r")
    assert [f.text for f in kept] == ["Ana is my sister."]  # (kept as said: /memory lists it in her words)
    prompts = [r.prompt for r in model.requests]
    assert results(prompts[1], "remember")[-1] == "Kept for later: Ana is your sister."
    assert results(prompts[3], "recall")[-1] == "Ana is your sister."
    shown = prompts[2][prompts[2].index("<facts>") : prompts[2].index("</facts>")]
    assert shown == "<facts>\n- Ana is your sister.\n"
    assert results(prompts[5], "recall")[-1] == NOTHING  # (hers alone: Bob is not shown it at all)


def test_the_facts_results_are_said_in_sentences() -> None:
    """What ``remember`` and ``recall`` show the model: sentences it can say as they are. "facts: none" was answered
    "I remember that I was not able to recall any specific facts from my last message." (seed 8), "Done:
    remembered: ..." copied into the answers after it."""
    assert recall.format is not None and remember.format is not None
    assert recall.format({"facts": []}) == NOTHING
    assert recall.format({"facts": ["Ana is your sister.", "You like tea"]}) == "Ana is your sister. You like tea."
    assert remember.format({"remembered": "Ana is your sister."}) == "Kept for later: Ana is your sister."
    group = {"remembered": "The party is on Friday", "for": "everyone in this chat"}
    assert remember.format(group) == "Kept for later: The party is on Friday (for everyone in this chat)"
