"""The embedded model's plain answers, mended: no maker the persona does not name, no refusal after a tool, no
onlooker's account of a tool that failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core import AgentOptions, Bot, InMemoryStore, ScriptedModel, context, create_agent
from core.models import ModelRequest
from core.models.answer_guards import (
    IdentityGuard,
    about_itself,
    claimed,
    copies_kept,
    failure_reason,
    in_results_words,
    is_refusal,
    labelled,
    narrates,
    result_note,
    sentences,
    shows_result,
    spoken,
    unclaimed,
    unlabelled,
    unnoted,
)
from core.turns import TURN_STOPS

from .test_tool_calls import scripted_model

PERSONA = "You are Daydream, a friendly assistant. Answer briefly."


def guarded(text: str, persona: str = PERSONA) -> str:
    """``text`` fed to the guard cut at every position, joined: the same whatever the cuts."""
    results = set()
    for cut in range(len(text) + 1):
        guard = IdentityGuard(persona)
        results.add(guard.feed(text[:cut]) + guard.feed(text[cut:]) + guard.close())
    assert len(results) == 1, results
    return results.pop()


@pytest.mark.parametrize(
    ("answer", "mended"),
    [
        ("I am Daydream. I was created by OpenAI.", "I am Daydream. "),
        ("Yes, I am ChatGPT. I help with questions.", "I help with questions."),
        ("I was created by OpenAI.", "I am Daydream, a friendly assistant."),
        ("OpenAI makes models. I like them.", "OpenAI makes models. I like them."),
        ("Hello! How can I help?", "Hello! How can I help?"),
        ("I am Daydream.\nuser: and you?", "I am Daydream.\nuser: and you?"),
    ],
)
def test_a_sentence_claiming_a_maker_is_left_out(answer: str, mended: str) -> None:
    assert guarded(answer) == mended


def test_a_maker_the_persona_names_is_kept() -> None:
    assert guarded("I am Qwen, made by Alibaba.", "You are Qwen, made by Alibaba.") == "I am Qwen, made by Alibaba."


def test_what_is_checked() -> None:
    assert about_itself("Who made you?") and about_itself("Es-tu ChatGPT ?") and not about_itself("Capital of Peru?")
    assert is_refusal("I'm sorry, but I can't assist with that request.") and not is_refusal("Done: saved.")


def reply_with(text: str) -> Any:
    return lambda body: text


async def test_a_refusal_after_a_successful_tool_becomes_its_result(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, reply_with("I'm sorry, but I can't assist with that request."))
    turns = (
        ("user", "Remember that my cat is Miso."),
        ("tool_call", '{"name": "remember", "arguments": {"fact": "cat: Miso"}}'),
        ("tool", '{"remembered": "cat: Miso"}'),
    )
    request = ModelRequest(system="s", prompt="", plain=True, turns=turns, stop=TURN_STOPS)
    assert "".join([c async for c in model.stream(request)]) == "Done: remembered: cat: Miso"
    # (a result its action says in sentences is said as it is: "Done: ..." was copied into the answers after it)
    said = (*turns[:2], ("tool", "Nothing is kept about you yet."))
    request = ModelRequest(system="s", prompt="", plain=True, turns=said, stop=TURN_STOPS)
    assert "".join([c async for c in model.stream(request)]) == "Nothing is kept about you yet."
    failed = (*turns[:2], ("tool", "error: the store is down"))
    request = ModelRequest(system="s", prompt="", plain=True, turns=failed, stop=TURN_STOPS)
    assert "".join([c async for c in model.stream(request)]).startswith("I'm sorry")


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("The conversation keeps a list of tasks and attempts to remove one item from it.", False),
        ("The conversation ends with an error: there's no todo like that.", False),  # why, but as an onlooker
        ("The conversion from dollars to yen results in an error.", False),  # not why
        ("", False),
        ("I found no todo like that on your list. Which one should I take off?", True),
    ],
)
async def test_an_answer_after_a_failed_tool_says_why(tmp_path: Path, answer: str, said: bool) -> None:
    model = scripted_model(tmp_path, reply_with(answer))
    turns = (
        ("user", "I called the plumber, take it off my list."),
        ("tool_call", '{"name": "remove_todo", "arguments": {"item": "take it off my list"}}'),
        ("tool", "error: 'remove_todo' raised ValueError: no todo like 'take it off my list'"),
    )
    request = ModelRequest(system="s", prompt="", plain=True, turns=turns, stop=TURN_STOPS)
    text = "".join([c async for c in model.stream(request)])
    assert text == (answer if said else "Sorry, I couldn't do that: no todo like 'take it off my list'.")


WEATHER = (
    ("user", "What's the weather in Lisbon?"),
    ("tool_call", '{"name": "weather", "arguments": {"city": "Lisbon"}}'),
    ("tool", '{"city": "Lisbon", "forecast": "light rain"}'),
)


async def answered_after(tmp_path: Path, turns: Any, answers: list[str]) -> tuple[str, Any]:
    """The answer after the tool of ``turns`` from a model that writes ``answers`` one after the other, and the
    model (its requests in ``_server.bodies``)."""
    written = iter(answers)
    model = scripted_model(tmp_path, lambda body: next(written))
    request = ModelRequest(system="s", prompt="", plain=True, turns=turns, stop=TURN_STOPS)
    return "".join([c async for c in model.stream(request)]), model


@pytest.mark.parametrize(
    ("answers", "kept"),
    [
        (["The result says that Lisbon gets light rain today.", "Lisbon gets light rain today."], 1),  # told again
        (["The result says that Lisbon gets light rain.", "The conversation keeps: Lisbon, light rain."], 0),
        (["Light rain in Lisbon today, take an umbrella."], 0),  # spoken to the person: written once
    ],
)
async def test_an_answer_that_tells_of_the_result_is_written_once_more_and_its_lead_cut(
    tmp_path: Path, answers: list[str], kept: int
) -> None:
    text, model = await answered_after(tmp_path, WEATHER, answers)
    assert text == spoken(answers[kept]) and len(model._server.bodies) == len(answers)
    assert not text.lower().startswith(("the result", "the conversation"))


def test_a_lead_that_tells_of_the_result_is_cut() -> None:
    assert spoken("The result says that the weather in Lisbon is light rain.") == "The weather in Lisbon is light rain."
    assert spoken("The conversation keeps: Weather: light rain") == "Weather: light rain"
    assert spoken("According to the result, it rains.") == "It rains."
    assert spoken("The result of remember: remembered: I like green tea.") == "Remembered: I like green tea."
    assert spoken("The result of the recall tool: facts: tea") == "Facts: tea"
    assert narrates("The result of recall: facts: tea") and not narrates("The result of the match was 2-1.")
    assert spoken("The conversation was lovely, thanks!") == "The conversation was lovely, thanks!", "no telling verb"
    assert spoken("The result says:") == "The result says:", "nothing after it: left"
    assert spoken("I searched your notes for the wifi password. The result says that no notes were found.") == (
        "I searched your notes for the wifi password. No notes were found."
    ), "a telling lead inside the answer too (bench/tools.py's planner)"
    asked = "I was asked what time it is in Tokyo right now. It is 19:53 on Tuesday 1 December 2026 in Asia/Tokyo."
    assert spoken(asked) == "It is 19:53 on Tuesday 1 December 2026 in Asia/Tokyo.", "the question said again: cut"
    assert spoken("You asked me for 6 times 7. It is 42.") == "It is 42."
    assert (
        spoken("I was told that today is Tuesday 1 December 2026 in UTC.") == "Today is Tuesday 1 December 2026 in UTC."
    )
    assert spoken("I was asked to add milk.") == "I was asked to add milk.", "nothing after it: left"


RECALLED = (
    ("user", "What do you remember about me?"),
    ("tool_call", '{"name": "recall", "arguments": {}}'),
    ("tool", '{"facts": ["Ana is your sister.", "You live in Lisbon."]}'),
)


@pytest.mark.parametrize(
    ("answers", "said"),
    [
        # the result's form copied ('facts: ["..."]', the embedded model's answer to the built-in assistant's
        # recall on seeds 2, 3 and 5): written once more, and the copy, told twice, said without its lead
        (
            ['facts: ["Ana is your sister.", "You live in Lisbon."]', "Fact: Ana is your sister. You live in Lisbon."],
            "Ana is your sister. You live in Lisbon.",
        ),
        (
            ["facts: Ana is your sister.", "I know that Ana is your sister and that you live in Lisbon."],
            "I know that Ana is your sister and that you live in Lisbon.",
        ),
        (["Ana is your sister, and you live in Lisbon."], "Ana is your sister, and you live in Lisbon."),
    ],
)
async def test_an_answer_that_copies_the_result_s_form_is_written_once_more_and_said_without_it(
    tmp_path: Path, answers: list[str], said: str
) -> None:
    text, model = await answered_after(tmp_path, RECALLED, answers)
    assert text == said and len(model._server.bodies) == len(answers)
    note = model._server.bodies[0]["messages"][-1]["content"]
    assert "facts: Ana is your sister. You live in Lisbon." in note, "a list of strings is shown as words, not JSON"


def test_what_copies_the_result_s_form_and_what_is_cut() -> None:
    facts = '{"facts": ["Ana is your sister."]}'
    assert labelled("Fact: Ana is your sister.", facts) and labelled("Done: facts: none", facts)
    assert not labelled("Ana is your sister.", facts) and not labelled("Facts are facts.", facts)
    assert unlabelled('Done: facts: ["Ana is your sister."]', facts) == "Ana is your sister."
    assert unlabelled("facts: none", facts) == "facts: none", "nothing said without it"
    added = '{"added": "Buy milk", "items_now": 4}'
    assert labelled("added: Buy milk", added) and labelled("Items now: 4", added)
    assert unlabelled("Added: Buy milk.", added) == "Added: Buy milk.", "a key that says what was done stays"
    assert unlabelled("Done: added: Buy milk.", added) == "Added: Buy milk."
    assert not labelled("Done.", "plain text") and unlabelled("Done: it", "plain text") == "Done: it"


def test_only_a_handler_s_own_words_are_a_reason_for_the_person() -> None:
    assert failure_reason("error: 'exchange' raised ValueError: unknown currency:\n use EUR") == (
        "unknown currency: use EUR"
    )
    refused = "error: 'remember' was not run: it is reserved to the admin tier or above; tell them you may not"
    assert failure_reason(refused) is None, "words to the model, not to the person"
    assert failure_reason("error: 'convert' timed out after 10s") is None


async def test_an_answer_about_itself_keeps_to_the_persona(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, reply_with("I am Daydream. I was designed by OpenAI."))
    ask = ModelRequest(system=f"{PERSONA}\n\nRules.", prompt="", plain=True, turns=(("user", "Who are you?"),))
    assert "".join([c async for c in model.stream(ask)]) == "I am Daydream. "
    other = ModelRequest(system=PERSONA, prompt="", plain=True, turns=(("user", "Capital of Peru?"),))
    assert "OpenAI" in "".join([c async for c in model.stream(other)]), "only answers about the bot are checked"


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("You have the dentist at 15:30.", True),
        ("On Tuesday there is nothing.", False),
        ("10 km are about 6.2 miles.", True),
        ("10 km are about 8 miles.", False),
        ("That is 37,500 yen.", True),
    ],
)
def test_an_answer_shows_what_the_result_adds_to_the_message(answer: str, shown: bool) -> None:
    result = '{"day": "tuesday", "events": "dentist at 15:30", "value": 6.21, "amount": 37500.0}'
    assert shows_result(answer, result, "What's on my calendar on Tuesday, and 10 km in miles?") is shown
    assert shows_result("Noted.", '{"saved": "tea"}', "Remember that I like tea."), "it adds nothing to the message"


def test_a_kept_fact_is_shown_by_an_answer_that_does_not_say_whose_it_is() -> None:
    """``remember`` leaves a person's own fact unsaid (the default): as the words "the person who said it, alone", every
    answer was taken as leaving the result out, and "Done: remembered: ..., for: ..." was the answer."""
    result = '{"remembered": "Ana is my sister."}'  # (as tests/terminal/test_chat.py sees it)
    assert shows_result("Got it, I'll remember that your sister is Ana.", result, "Remember that my sister is Ana.")


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("I found no notes about the garden project.", True),  # bench/tools.py's planner, refused before
        ("There are none.", True),
        ("Je n'ai trouvé aucune note.", True),
        ("Ich habe keine Notizen gefunden.", True),
        ("No, I searched your notes.", False),  # "no" answering a question shows no count
        ("I searched your notes.", False),
    ],
)
def test_an_answer_that_found_nothing_shows_a_count_of_nothing(answer: str, shown: bool) -> None:
    result = '{"query": "garden project", "notes_found": 0, "results": []}'
    assert shows_result(answer, result, "Find my notes about the garden project.") is shown


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("The list now holds one item: milk.", True),
        ("Il y a maintenant trois choses.", True),
        ("Ahora hay tres cosas.", True),
        ("Your list is ready.", False),
        ("I'll do it once.", False),  # once is no number in English
    ],
)
def test_a_small_number_written_as_a_word_shows_it(answer: str, shown: bool) -> None:
    count = "1" if "one" in answer or "once" in answer or "ready" in answer else "3"
    assert shows_result(answer, f'{{"todos": {count}}}', "add milk to my list") is shown


async def test_the_note_of_a_result_copied_into_the_answer_is_cut(tmp_path: Path) -> None:
    """The model copied the note its prompt shows the result in, ``(the result of add_todo: ...)``, into its
    answer (``bench/tools.py``'s planner, "I bought 2 kg of apples."): the person gets the answer without it."""
    note = result_note("weather", "city: Lisbon, forecast: light rain")
    model = scripted_model(tmp_path, lambda body: f"Light rain in Lisbon today. {note}")
    request = ModelRequest(system="s", prompt="", plain=True, turns=WEATHER, stop=TURN_STOPS)
    assert "".join([c async for c in model.stream(request)]) == "Light rain in Lisbon today."
    assert note in model._server.bodies[0]["messages"][-1]["content"], "the note is the prompt's own"
    assert unnoted("Rain (the result of a tool: rain), (sic) and sun.") == "Rain, (sic) and sun."
    assert unnoted("It costs 5 (in euros).") == "It costs 5 (in euros).", "the model's own brackets stay"


KEPT = "What this conversation keeps:\nTodo list:\n1. buy milk\n2. call the plumber"


def kept_request(message: str) -> ModelRequest:
    system = f"You are Plan.\n\nRules.\n\n{KEPT}\n\nYou are talking with Ann."
    return ModelRequest(system=system, prompt="", plain=True, turns=(("user", message),), stop=TURN_STOPS, kept=KEPT)


def copier(then: str) -> Any:
    """Copies what the conversation keeps while the prompt shows it (adding an item of its own, as the 0.5B model
    did in ``bench/tools.py``'s planner); answers ``then`` without it."""
    copy = "The conversation keeps: Todo list:\n1. buy milk\n2. call the plumber\n3. go to Lisbon"
    return lambda body: copy if "conversation keeps" in body["messages"][0]["content"] else then


async def test_an_answer_that_copies_what_the_conversation_keeps_is_written_without_it(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, copier("Good luck with your flight!"))
    text = "".join([c async for c in model.stream(kept_request("I'm flying to Lisbon on Friday."))])
    assert text == "Good luck with your flight!"
    first, again = model._server.bodies
    assert KEPT in first["messages"][0]["content"]
    assert again["messages"][0]["content"] == "You are Plan.\n\nRules.\n\nYou are talking with Ann."
    assert again["messages"][1:] == first["messages"][1:]


async def test_an_answer_to_a_remark_that_starts_with_a_line_of_the_state_is_written_without_it(
    tmp_path: Path,
) -> None:
    """The splitter of ``bench/tools.py``: "Carla bought the train tickets." answered with the expenses its state
    shows, one line after the other, and no word to the person."""
    copy = "Call the plumber.\nBuy milk."  # (the state's "2. call the plumber", its mark left out)
    model = scripted_model(tmp_path, lambda body: copy if KEPT in body["messages"][0]["content"] else "Noted!")
    assert "".join([c async for c in model.stream(kept_request("I had a long day."))]) == "Noted!"
    asked = scripted_model(tmp_path, lambda body: copy)
    assert "".join([c async for c in asked.stream(kept_request("What's first on my list?"))]) == copy


@pytest.mark.parametrize("question", ["What's on my list?", "¿Qué hay en mi lista?", "リストには何がありますか？"])
async def test_to_a_question_the_copy_is_the_answer_without_its_lead(tmp_path: Path, question: str) -> None:
    model = scripted_model(tmp_path, copier("never asked"))
    text = "".join([c async for c in model.stream(kept_request(question))])
    assert text == "Todo list:\n1. buy milk\n2. call the plumber\n3. go to Lisbon"
    assert len(model._server.bodies) == 1


@pytest.mark.parametrize("answer", ["The weather is fine.", "This conversation was fun!", "", "The"])
async def test_an_answer_that_copies_nothing_streams_as_written(tmp_path: Path, answer: str) -> None:
    model = scripted_model(tmp_path, reply_with(answer))
    chunks = [c async for c in model.stream(kept_request("I'm flying to Lisbon on Friday."))]
    assert "".join(chunks) == answer and len(model._server.bodies) == 1
    if len(answer) > 12:
        assert len(chunks) > 1, "streamed, not held to its end"


def test_how_a_copy_of_what_the_conversation_keeps_starts() -> None:
    assert copies_kept("The conversation keeps: Todo") is True
    assert copies_kept("**What this conversation keeps:**") is True
    assert copies_kept("This conv") is None and copies_kept("") is None
    assert copies_kept("This conversation was") is False and copies_kept("Good") is False


def test_a_line_of_what_the_conversation_keeps_copied_word_for_word_is_a_copy() -> None:
    kept = "What the trip context keeps:\nThe group: Ana, Ben, Carla\nExpenses:\n- Ana paid 30.00 for dinner"
    assert copies_kept("Ana paid $30.00 for dinner.", kept) is True, "the signs around a number do not count"
    assert copies_kept("The group: Ana, Ben, Carla", kept) is True
    assert copies_kept("Ana paid $30", kept) is None, "the start of a line: too short to tell"
    assert copies_kept("Ana paid for", kept) is False and copies_kept("Great, thanks!", kept) is False
    assert copies_kept("Expenses: none", kept) is True, "the label a line starts with"
    assert copies_kept("Expenses are", kept) is False and copies_kept("Expens", kept) is None
    assert copies_kept("Todo list: Milk today", "What the todo context keeps:\nTodo list: (empty)") is True


async def test_the_compact_prompt_says_which_part_of_it_shows_what_the_conversation_keeps() -> None:
    """``ModelRequest.kept``: the bot's ``render`` as the system message shows it; none for a bot without one."""
    todo = context(type="todo", schema=str, create=lambda state: {"todos": ["buy milk"]}, render=lambda s: "Todo: milk")
    platform = context(type="chat", schema=str, key=lambda chat: chat, conversation=True)
    for bot, kept in ((Bot(name="todo", context=todo), "What this conversation keeps:\nTodo: milk"), (None, "")):
        model = ScriptedModel(lambda request: "Hi.")
        agent = create_agent(
            model=model,
            bot=bot or Bot(name="assistant"),
            contexts=[platform],
            memory=InMemoryStore(),
            options=AgentOptions(compact_prompt=True),
        )
        async with agent:
            await agent.send(platform, "a", {"type": "chat:message", "data": "hi"})
        request = model.requests[0]
        assert request.kept == kept and kept in request.system


@pytest.mark.parametrize(
    ("answer", "claimed_action"),
    [
        ("I added `call the bank` to my list. I now have 2 items.", "add_todo"),
        ("Sure! I've just sent the email to Tom.", "send_email"),
        ("Your table has been booked for 7 people.", "bookTable"),
        ("Added bread to your list.", "add_todo"),
        ("The item was removed from your list.", "remove_todo"),
        ("I've set a timer for 4 minutes.", "set_timer"),
        ("I will add it to your list.", None),  # not done: offered
        ("Would you like me to add it?", None),
        ("You have added bread.", None),  # the person did it
        ("I bought milk today.", None),  # no action's verb
    ],
)
def test_an_answer_that_says_an_action_was_done_claims_it(answer: str, claimed_action: str | None) -> None:
    actions = ("add_todo", "send_email", "bookTable", "remove_todo", "set_timer")
    assert claimed(answer, actions) == claimed_action


def test_the_sentences_that_claim_an_action_are_cut() -> None:
    assert unclaimed("Nice! I added milk to your list. Anything else?", "add_todo") == "Nice! Anything else?"
    assert unclaimed("I added milk to your list.", "add_todo") == ""
    assert sentences("Nice! I added") == 2 and sentences("") == 1


def test_an_answer_in_the_form_of_a_said_result_is_the_result_itself() -> None:
    """Asked "Forget that my sister is Ana.", the embedded model answered "Forgotten for good: You are a
    vegetarian.", the form of the result with the fact kept the line before: an answer that starts with the lead of
    a result said in sentences is that result."""
    result = "Forgotten for good: Ana is your sister."
    assert in_results_words("Forgotten for good: You are a vegetarian.", result) == result
    assert in_results_words("I forgot that Ana is your sister.", result) == "I forgot that Ana is your sister."
    assert in_results_words("Facts: tea", '{"facts": ["tea"]}') == "Facts: tea", "a form: labelled's to judge"
    assert in_results_words("It is 19:53.", "It is 19:53 on Tuesday in UTC.") == "It is 19:53."
