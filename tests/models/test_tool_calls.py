"""Offline tools of the embedded model: the tool-call grammar, reading a call back, and the adapter's flow.

The grammar is checked by llama.cpp itself with the small SmolLM2 (its own template knows no tools, so whatever it
writes comes from the grammar): at a high temperature, every answer is a call that parses, names an offered tool
and has arguments its schema accepts. The adapter's flow (decide, call, answer after the result, one slot per
conversation) runs against a scripted stand-in for llama.cpp's server, so no weights are needed there.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest

from core.facts.actions import RememberArgs as KeptFactArgs
from core.models import LocalModel, ModelRequest
from core.models.base import ToolSpec
from core.models.grammar import (
    TOOL_CALL_OPEN,
    ToolCall,
    parse_tool_call,
    tool_call_grammar,
    tool_call_start,
)
from core.models.local import _CALL_LIMITS
from core.models.tool_routing import (
    closest_action,
    grounded,
    narrowed,
    offered_again,
    remark,
    repeated,
    stated,
    unborrowed,
)
from core.parser import TagEnd, parse
from core.turns import TURN_STOPS


class RememberArgs(pydantic.BaseModel):
    fact: str = pydantic.Field(min_length=1)


class TimeArgs(pydantic.BaseModel):
    timezone: str = "UTC"


class SearchArgs(pydantic.BaseModel):
    words: str = ""
    since: str = ""
    limit: int = pydantic.Field(default=5, ge=1, le=20)
    kind: str = pydantic.Field(default="any", json_schema_extra={"enum": ["any", "mine"]})


SCHEMAS: dict[str, type[pydantic.BaseModel]] = {
    "remember": RememberArgs,
    "current_time": TimeArgs,
    "search": SearchArgs,
}
TOOLS = tuple(
    ToolSpec(name=name, description=f"The {name} tool.", parameters=schema.model_json_schema())
    for name, schema in SCHEMAS.items()
)


def test_the_grammar_names_each_tool_and_its_arguments() -> None:
    grammar = tool_call_grammar(TOOLS)
    assert grammar.startswith("root ::= answer | tool-call\n")
    for name in SCHEMAS:
        assert f'"\\"{name}\\""' in grammar
    assert '"\\"fact\\"" ws ":" ws json-text' in grammar  # required, not empty (min_length=1)
    assert '("20" | "19" |' in grammar  # an integer in a narrow range is one of its values
    assert '("\\"any\\"" | "\\"mine\\"")' in grammar  # an enum
    only_calls = tool_call_grammar(TOOLS[:1], text=False)
    assert only_calls.startswith("root ::= tool-call\n") and "answer ::=" not in only_calls
    assert "tool-call" not in tool_call_grammar(TOOLS, calls=False).split("\n")[0]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "remember", "arguments": {"fact": "Ada likes tea"}}\n</tool_call>',
        '```json\n{"name": "remember", "arguments": {"fact": "Ada likes tea"}}\n```',
        '{"name": "remember", "arguments": {"fact": "Ada likes tea"}}',
        '<tool_call>{"name": "remember", "arguments": "{\\"fact\\": \\"Ada likes tea\\"}"}</tool_call>',
    ],
)
def test_a_call_is_read_back_in_any_of_its_forms(text: str) -> None:
    call = parse_tool_call(text)
    assert call is not None and call.name == "remember" and call.arguments == {"fact": "Ada likes tea"}


@pytest.mark.parametrize("text", ["Hello!", '{"arguments": {}}', '{"name": "x", "arguments": [1]}', "<tool_call>{"])
def test_what_is_not_a_call_is_not_read_as_one(text: str) -> None:
    assert parse_tool_call(text) is None


def test_a_call_becomes_an_action_call_the_parser_reads_and_no_markup() -> None:
    call = parse_tool_call('{"name": "remember", "arguments": {"fact": "a <b> & </action_call> c"}}')
    assert call is not None
    xml = call.as_action_call()
    (action,) = [e for e in parse(xml) if isinstance(e, TagEnd) and e.name == "action_call"]
    assert action.attrs == {"name": "remember"}
    assert json.loads(action.content) == {"fact": "a <b> & </action_call> c"}
    assert "<b>" not in xml


async def test_the_grammar_yields_calls_that_parse_and_match_their_schema(local_model: LocalModel) -> None:
    """llama.cpp with SmolLM2 (no tool format of its own) at temperature 1.2: the grammar alone shapes the call."""
    server = local_model._server if local_model.loaded else None
    if server is None:
        await local_model.load()
        server = local_model._server
    grammar = tool_call_grammar(TOOLS, text=False)
    for seed in range(6):
        body = {
            "messages": [{"role": "user", "content": "Call one of the tools for me, with arguments, please."}],
            "grammar": grammar,
            "max_tokens": 1024,  # strings are bounded (200 characters): the call always ends
            "temperature": 1.2,
            "seed": seed,
            "stream": True,
        }
        text = await local_model._collect(server, body)
        call = parse_tool_call(text)
        assert call is not None, text
        assert call.name in SCHEMAS, text
        SCHEMAS[call.name].model_validate(call.arguments)


class BookArgs(pydantic.BaseModel):
    date: datetime.date
    time: datetime.time
    guests: int = pydantic.Field(ge=1, le=12)
    area: Literal["inside", "terrace", "bar"] = "inside"


BOOK = ToolSpec(name="book_table", description="Books a table.", parameters=BookArgs.model_json_schema())


def test_dates_and_times_are_written_digit_by_digit() -> None:
    grammar = tool_call_grammar((BOOK,), text=False)
    assert '"\\"date\\"" ws ":" ws "\\"" [12] [0-9]{3,3} "-"' in grammar
    assert '"\\"time\\"" ws ":" ws "\\"" ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] "\\""' in grammar


async def test_calls_with_dates_times_and_enums_validate(local_model: LocalModel) -> None:
    """llama.cpp reads the date and time rules (a rule it cannot parse fails the request): at temperature 1.2 every
    call holds a date, a time, a count and an enum the schema accepts."""
    await local_model.load()
    grammar = tool_call_grammar((BOOK,), text=False)
    for seed in range(4):
        body = {
            "messages": [{"role": "user", "content": "Book a table, please."}],
            "grammar": grammar,
            "max_tokens": 256,
            "temperature": 1.2,
            "seed": seed,
            "stream": True,
        }
        text = await local_model._collect(local_model._server, body)
        call = parse_tool_call(text)
        assert call is not None and call.name == "book_table", text
        # (the grammar knows no calendar: "2026-02-30" has the shape of a date, which the action would refuse)
        assert re.fullmatch(r"[12]\d{3}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", call.arguments["date"]), text
        BookArgs.model_validate({**call.arguments, "date": "2026-06-12"})


# -- the adapter's flow, against a scripted server ----------------------------------------------------------


class FakeServer:
    """Stands in for ``xllamacpp.Server``: answers each body with ``reply(body)``, streamed in small chunks."""

    def __init__(self, reply: Callable[[dict[str, Any]], str]) -> None:
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []
        self.threads: set[int] = set()

    def handle_chat_completions(self, body: dict[str, Any], on_chunk: Callable[[Any], bool]) -> None:
        self.bodies.append(body)
        self.threads.add(threading.get_ident())
        text = after_start(self.reply(body), body)
        for start in range(0, len(text), 3):
            if on_chunk({"choices": [{"delta": {"content": text[start : start + 3]}}]}):
                return
        on_chunk({"choices": [{"delta": {}}], "usage": {"prompt_tokens": 9, "completion_tokens": 4}})


def after_start(text: str, body: dict[str, Any]) -> str:
    """What a model writes of ``text`` after the start of its turn ``body`` gives (a trailing assistant message,
    which llama.cpp prefills: the start of a tool call): a call scripted whole, or without its tags, loses it."""
    last = (body.get("messages") or [{}])[-1]
    if last.get("role") != "assistant":
        return text
    for start in (last["content"], last["content"].removeprefix(f"{TOOL_CALL_OPEN}\n")):
        if text.startswith(start):
            return text[len(start) :]
    return text


def scripted_model(tmp_path: Path, reply: Callable[[dict[str, Any]], str], *, slots: int = 2) -> LocalModel:
    model = LocalModel(model_path=tmp_path / "model.gguf", slots=slots, threads=1)
    model.calls_tools = True
    model._server = FakeServer(reply)
    return model


def request(*turns: tuple[str, str], context: str = "chat:1") -> ModelRequest:
    return ModelRequest(
        system="You are helpful.",
        prompt="",
        plain=True,
        turns=turns,
        tools=TOOLS,
        max_tokens=64,
        stop=TURN_STOPS,
        metadata={"context_id": context},
    )


def router_or(answer: str, route: str) -> Callable[[dict[str, Any]], str]:
    def reply(body: dict[str, Any]) -> str:
        if body["max_tokens"] == 16:  # the decision
            return route
        return answer

    return reply


async def test_a_message_that_needs_no_tool_gets_a_plain_reply_without_tools(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, router_or("Paris.", "none"))
    text = "".join([c async for c in model.stream(request(("user", "Capital of France?")))])
    assert text == "Paris."
    decide, answer = model._server.bodies
    assert decide["grammar"] == 'root ::= "remember" | "current_time" | "search" | "none"\n'
    assert decide["messages"][-1] == {"role": "user", "content": "Capital of France?"}
    assert decide["id_slot"] == 4, "deciding has slots of its own (after the conversations' and the scratch ones)"
    assert "tools" not in answer and "grammar" not in answer and answer["stop"] == list(TURN_STOPS)
    assert answer["id_slot"] == 0


async def test_a_message_that_needs_a_tool_gets_its_call_as_an_action_call(tmp_path: Path) -> None:
    call = '<tool_call>\n{"name": "current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>'
    model = scripted_model(tmp_path, router_or(call, "current_time"))
    text = "".join([c async for c in model.stream(request(("user", "Time in Tokyo?")))])
    assert text == '<response><action_call name="current_time">{"timezone": "Asia/Tokyo"}</action_call></response>'
    _, calling = model._server.bodies
    assert [t["function"]["name"] for t in calling["tools"]] == ["current_time"]
    start, rest = tool_call_start(TOOLS[1], limits=_CALL_LIMITS)
    assert calling["tool_choice"] == "none" and calling["grammar"] == rest, "the grammar of what follows the start"
    assert calling["messages"][-1] == {"role": "assistant", "content": start}, "the call's start is prefilled"
    assert calling["id_slot"] == 2, "writing the call has a slot of its own"


async def test_after_a_result_the_model_answers_from_it_in_the_conversations_slot(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, router_or("It is 15:03 in Tokyo.", "none"))
    turns = (
        ("user", "Hi"),
        ("assistant", "Hello!"),
        ("user", "Time in Tokyo?"),
        ("tool_call", '{"name": "current_time", "arguments": {"timezone": "Asia/Tokyo"}}'),
        ("tool", '{"iso": "2026-11-24T15:03:00+09:00"}'),
    )
    text = "".join([c async for c in model.stream(request(*turns))])
    assert text == "It is 15:03 in Tokyo."
    (answer,) = model._server.bodies  # no decision: a result is answered, never followed by another call
    assert "tools" not in answer and answer["id_slot"] == 0
    assert answer["messages"][1:] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {
            "role": "user",
            "content": "Time in Tokyo?\n\n(the result of current_time: iso: 2026-11-24T15:03:00+09:00)",
        },
    ]


async def test_an_incomplete_call_gives_an_empty_response_not_an_error(tmp_path: Path) -> None:
    model = scripted_model(
        tmp_path, router_or('<tool_call>\n{"name": "remember", "arguments": {"fact": "I li', "remember")
    )
    text = "".join([c async for c in model.stream(request(("user", "Remember that I like tea.")))])
    assert text == "<response></response>"


async def test_each_conversation_keeps_its_slot_and_the_least_recent_one_gives_it_up(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, router_or("ok", "none"), slots=2)

    async def say(context: str) -> int:
        [c async for c in model.stream(request(("user", "hi"), context=context))]
        return int(model._server.bodies[-1]["id_slot"])

    assert [await say("a"), await say("b"), await say("a"), await say("b")] == [0, 1, 0, 1]
    assert await say("c") == 0, "a was the least recently active"
    assert await say("b") == 1 and await say("a") == 0
    summary = ModelRequest(system="s", prompt="p", plain=True, metadata={"purpose": "summary", "context_id": "b"})
    [c async for c in model.stream(summary)]
    assert model._server.bodies[-1]["id_slot"] == 2, "a summary takes the scratch slot, not a conversation's"
    assert len(model._server.threads) >= 1 and threading.get_ident() not in model._server.threads


class MeetingServer(FakeServer):
    """A fake server whose requests wait for one another: each returns only once ``together`` of them are being
    handled at the same time (a model that served one request after another would never get there)."""

    def __init__(self, reply: Callable[[dict[str, Any]], str], together: int) -> None:
        super().__init__(reply)
        self.barrier = threading.Barrier(together, timeout=120)

    def handle_chat_completions(self, body: dict[str, Any], on_chunk: Callable[[Any], bool]) -> None:
        self.barrier.wait()
        super().handle_chat_completions(body, on_chunk)


async def test_two_conversations_decide_and_answer_side_by_side(tmp_path: Path) -> None:
    """Issue 55: two people at once. Their decisions are made at the same time in two deciding slots, and their
    answers at the same time in their own conversations' slots: neither waits for the other's to end."""
    model = scripted_model(tmp_path, router_or("Paris.", "none"), slots=2)
    model._server = MeetingServer(router_or("Paris.", "none"), together=2)

    async def say(context: str) -> str:
        return "".join([c async for c in model.stream(request(("user", "Capital of France?"), context=context))])

    assert await asyncio.gather(say("a"), say("b")) == ["Paris.", "Paris."]
    decisions = sorted(b["id_slot"] for b in model._server.bodies if b["max_tokens"] == 16)
    answers = sorted(b["id_slot"] for b in model._server.bodies if b["max_tokens"] != 16)
    assert decisions == [4, 5] and answers == [0, 1]


async def test_a_conversation_writes_its_next_call_in_the_scratch_slot_of_its_last(tmp_path: Path) -> None:
    """A tool call's prompt (the conversation with its tool listed) is mostly the one of the conversation's last call:
    written in the same scratch slot when it is idle, only what is new is evaluated."""
    call = '<tool_call>\n{"name": "current_time", "arguments": {"timezone": "UTC"}}\n</tool_call>'
    reply = router_or(call, "current_time")
    model = scripted_model(tmp_path, reply, slots=2)
    model._server = MeetingServer(reply, together=2)

    async def ask(context: str) -> None:
        [c async for c in model.stream(request(("user", "What time is it?"), context=context))]

    await asyncio.gather(ask("a"), ask("b"))
    assert sorted(b["id_slot"] for b in model._server.bodies if "tools" in b) == [2, 3]
    second = next(key for key, slot in model._helper_of.items() if slot == 3)
    model._server = FakeServer(reply)
    await ask(second)  # alone: the first idle scratch slot would be 2
    assert [b["id_slot"] for b in model._server.bodies if "tools" in b] == [3]


RECALL = ToolSpec(
    name="recall", description="Lists the facts kept.", parameters={"type": "object", "additionalProperties": True}
)


async def test_a_tool_that_takes_no_arguments_is_called_without_the_model_writing_them(tmp_path: Path) -> None:
    """``recall`` (``dict[str, Any]``): asked to write its arguments, the 0.5B model wrote the schema itself, and
    the call was dropped as made up; the call is ``{}``, and only the decision asks the model."""
    model = scripted_model(tmp_path, router_or("(never asked)", "recall"))
    asked = replace(request(("user", "What do you remember about me?")), tools=(*TOOLS, RECALL))
    text = "".join([c async for c in model.stream(asked)])
    assert text == '<response><action_call name="recall">{}</action_call></response>'
    assert [b["max_tokens"] for b in model._server.bodies] == [16], "the decision only"
    assert '"\\"recall\\"" ws "," ws "\\"arguments\\"" ws ":" ws "{" ws "}"' in tool_call_grammar((RECALL,))


async def test_an_empty_result_is_read_as_none(tmp_path: Path) -> None:
    """An empty list read as ``facts: []`` was answered with facts made up; ``facts: none`` is answered as none."""
    model = scripted_model(tmp_path, router_or("Nothing yet.", "none"))
    turns = (("user", "What do you remember?"), ("tool_call", '{"name": "recall", "arguments": {}}'))
    asked = replace(request(*turns, ("tool", '{"facts": [], "note": ""}')), tools=(*TOOLS, RECALL))
    assert "".join([c async for c in model.stream(asked)]) == "Nothing yet."
    shown = model._server.bodies[-1]["messages"][-1]["content"]
    assert shown.endswith("(the result of recall: facts: none, note: none)")


async def test_without_tool_support_the_tools_are_ignored(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, router_or("Hello!", "remember"))
    model.calls_tools = False
    text = "".join([c async for c in model.stream(request(("user", "Hi")))])
    assert text == "Hello!" and len(model._server.bodies) == 1 and "tools" not in model._server.bodies[0]


# -- a failed call, once more -----------------------------------------------------------------------------

FREE = {"type": "object", "additionalProperties": {"type": "number"}}
"""Arguments of any names (numbers): the scripted calls give what each test needs."""
UNITS = ToolSpec(name="convert", description="Converts a value between units of length.", parameters=FREE)
MONEY = ToolSpec(name="exchange", description="Converts money between currencies: euros, dollars.", parameters=FREE)
SAVE = ToolSpec(name="save", description="Saves a note.", parameters=FREE)


def failed(call: str, error: str, message: str = "Convert 100 euros to dollars.") -> ModelRequest:
    turns = (("user", message), ("tool_call", call), ("tool", f"error: {error}"))
    return ModelRequest(system="s", prompt="", plain=True, turns=turns, tools=(UNITS, MONEY, SAVE), max_tokens=64)


async def test_a_failed_call_is_decided_again_among_the_tools_closer_to_the_message(tmp_path: Path) -> None:
    call = '{"name": "exchange", "arguments": {"amount": 100}}'
    model = scripted_model(tmp_path, router_or(call, "exchange"))
    request = failed('{"name": "convert", "arguments": {"value": 100}}', "cannot convert euros to dollars")
    text = "".join([c async for c in model.stream(request)])
    assert text == '<response><action_call name="exchange">{"amount": 100}</action_call></response>'
    decide, calling = model._server.bodies
    assert decide["grammar"] == 'root ::= "exchange" | "none"\n', "only the tools closer than the failed one"
    assert "error: cannot convert euros to dollars" in calling["messages"][-2]["content"], "the error in view"


async def test_a_failed_call_no_other_tool_fits_is_written_once_more_and_only_once(tmp_path: Path) -> None:
    call = '{"name": "save", "arguments": {"text": "milk"}}'
    model = scripted_model(tmp_path, router_or(call, "none"))
    request = failed('{"name": "save", "arguments": {"text": ""}}', "text is empty", message="Save a note: milk")
    text = "".join([c async for c in model.stream(request)])
    assert text == '<response><action_call name="save">{"text": "milk"}</action_call></response>'
    assert [t["function"]["name"] for t in model._server.bodies[-1]["tools"]] == ["save"]
    again = replace(request, turns=(*request.turns, ("tool_call", call), ("tool", "error: still empty")))
    model._server.bodies.clear()
    assert "".join([c async for c in model.stream(again)]) == call, "a second failure is answered, not retried"
    (answer,) = model._server.bodies
    assert "tools" not in answer


class ExchangeArgs(pydantic.BaseModel):
    amount: float
    from_currency: str = pydantic.Field(description="Its currency code, e.g. EUR")
    to_currency: str = pydantic.Field(description="The currency code wanted, e.g. USD")


class TodoArgs(pydantic.BaseModel):
    item: str = pydantic.Field(min_length=1)


CODES = ToolSpec(name="exchange", description="Converts money.", parameters=ExchangeArgs.model_json_schema())
REMOVE = ToolSpec(name="remove_todo", description="Removes a todo.", parameters=TodoArgs.model_json_schema())
TODOS = (
    "You plan.\n\nWhat this conversation keeps:\nTodo list:\n1. buy milk\n2. call the plumber\n3. renew the passport"
    "\n\nWhat you know about this conversation:\n- Ada's cat is Miso\n- Ada walks at six"
)


def _enums(tool: ToolSpec) -> dict[str, list[str]]:
    return {k: v["enum"] for k, v in tool.parameters["properties"].items() if "enum" in v}


def test_a_value_the_error_refuses_is_given_again_only_among_the_values_it_lists() -> None:
    call = ToolCall(name="exchange", arguments={"amount": 250, "from_currency": "USD", "to_currency": "YEN"})
    asked = failed("{}", "", message="What's 250 dollars in yen?")
    error = "error: unknown currency: use one of EUR, USD, GBP, JPY, CHF"
    offered = offered_again(CODES, call, error, asked)
    assert _enums(offered) == {"to_currency": ["EUR", "USD", "GBP", "JPY", "CHF"]}, "USD is among them: kept free"
    assert _enums(CODES) == {}, "the tool as listed to the model is the author's"
    said = replace(call, arguments={**call.arguments, "to_currency": "jpy"})
    assert offered_again(CODES, said, error, asked) is CODES, "every value among those listed: nothing refused"


@pytest.mark.parametrize(
    ("message", "offer"),
    [
        ("I already called the plumber, take it off my list.", ["call the plumber"]),  # a word of the message
        ("Remove the last item of my todo list.", ["renew the passport"]),  # its place
        ("Cross off the second one.", ["call the plumber"]),  # of the list the tool names ("Todo list:")
        ("I walk at six anyway, drop it.", None),  # a word of a fact's: not of the list the tool is about
        ("Remove going to the gym.", None),  # neither: the failure stands (no todo acted on that was not named)
    ],
)
def test_a_value_the_error_quotes_is_given_again_among_the_items_the_state_shows_that_the_message_names(
    message: str, offer: list[str] | None
) -> None:
    wrote = message.split(",")[-1].strip(" .")
    call = ToolCall(name="remove_todo", arguments={"item": wrote})
    asked = replace(failed("{}", "", message=message), system=TODOS)
    offered = offered_again(REMOVE, call, f"error: no todo like {wrote!r}", asked)
    assert _enums(offered) == ({"item": offer} if offer else {})
    assert offered_again(REMOVE, call, "error: the list is locked", asked) is REMOVE, "a value not quoted: free"


async def test_a_call_that_turned_to_another_tool_and_failed_is_written_once_more_among_the_values_on_offer(
    tmp_path: Path,
) -> None:
    written = '{"name": "exchange", "arguments": {"amount": 250, "from_currency": "USD", "to_currency": "JPY"}}'
    model = scripted_model(tmp_path, router_or(written, "none"))
    turns = (
        ("user", "What's 250 dollars in yen?"),
        ("tool_call", '{"name": "convert", "arguments": {"value": 250}}'),
        ("tool", "error: cannot convert dollars to yen"),
        (
            "tool_call",
            '{"name": "exchange", "arguments": {"amount": 250, "from_currency": "USD", "to_currency": "YEN"}}',
        ),
        ("tool", "error: unknown currency: use one of EUR, USD, GBP, JPY, CHF"),
    )
    asked = replace(failed("{}", ""), turns=turns, tools=(UNITS, CODES, SAVE))
    text = "".join([c async for c in model.stream(asked)])
    assert text.startswith('<response><action_call name="exchange">')
    (calling,) = model._server.bodies  # no decision: the tool the first retry turned to
    assert '("\\"EUR\\"" | "\\"USD\\"" | "\\"GBP\\"" | "\\"JPY\\"" | "\\"CHF\\"")' in calling["grammar"]
    assert [t["function"]["name"] for t in calling["tools"]] == ["exchange"]
    assert "enum" not in json.dumps(calling["tools"]), "listed to the model as its author wrote it"
    third = replace(asked, turns=(*turns, ("tool_call", written), ("tool", "error: rates are down")))
    model._server.bodies.clear()
    answer = "".join([c async for c in model.stream(third)])
    assert not answer.startswith("<response>"), "a third failure is answered, not retried"
    assert all("tools" not in body for body in model._server.bodies)


async def test_the_line_before_the_message_tells_which_tool_was_meant(tmp_path: Path) -> None:
    call = '{"name": "exchange", "arguments": {"amount": 200}}'
    model = scripted_model(tmp_path, router_or(call, "exchange"))
    units = replace(UNITS, description="Converts a value between units: kg and pounds, km and miles.")
    money = replace(MONEY, description="Converts money between currencies: euros, pounds sterling.")
    turns = (
        ("user", "I have 200 euros left."),  # "pounds" fits both tools alike; "euros" only the money one
        ("assistant", "Good to know."),
        ("user", "How much is that in pounds?"),
        ("tool_call", '{"name": "convert", "arguments": {"value": 200}}'),
        ("tool", "error: cannot convert euros to pounds"),
    )
    asked = replace(failed("{}", ""), turns=turns, tools=(units, money, SAVE))
    text = "".join([c async for c in model.stream(asked)])
    assert text == '<response><action_call name="exchange">{"amount": 200}</action_call></response>'
    assert model._server.bodies[0]["grammar"] == 'root ::= "exchange" | "none"\n'


async def test_a_mended_call_is_answered_from_what_worked(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, router_or("100 euros are 108 dollars.", "none"))
    turns = (
        ("user", "Convert 100 euros to dollars."),
        ("tool_call", '{"name": "convert", "arguments": {"value": 100}}'),
        ("tool", "error: cannot convert euros"),
        ("tool_call", '{"name": "exchange", "arguments": {"amount": 100}}'),
        ("tool", '{"amount": 108.0, "currency": "USD"}'),
    )
    request = ModelRequest(system="s", prompt="", plain=True, turns=turns, tools=(UNITS, MONEY), max_tokens=64)
    assert "".join([c async for c in model.stream(request)]) == "100 euros are 108 dollars."
    (answer,) = model._server.bodies
    assert answer["messages"][-1]["content"] == (
        "Convert 100 euros to dollars.\n\n(the result of exchange: amount: 108.0, currency: USD)"
    )


async def test_an_answer_that_leaves_the_result_out_is_written_once_more_without_sampling(tmp_path: Path) -> None:
    answers = iter(["You have nothing on Tuesday.", "On Tuesday: the dentist at 15:30."])
    model = scripted_model(tmp_path, lambda body: next(answers))
    turns = (
        ("user", "What's on Tuesday?"),
        ("tool_call", '{"name": "search", "arguments": {"words": "tuesday"}}'),
        ("tool", '{"day": "tuesday", "events": "dentist at 15:30"}'),
    )
    assert "".join([c async for c in model.stream(request(*turns))]) == "On Tuesday: the dentist at 15:30."
    first, second = model._server.bodies
    assert first["temperature"] > 0 and second["temperature"] == 0.0


async def test_a_call_whose_arguments_come_from_nowhere_is_answered_without_the_tool(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        if body["max_tokens"] == 16:
            return "search"
        if "tools" in body:
            return '{"name": "search", "arguments": {"words": "penguins in Oslo", "limit": 5}}'
        return "Fine, thanks!"

    model = scripted_model(tmp_path, reply)
    assert "".join([c async for c in model.stream(request(("user", "How are you today?")))]) == "Fine, thanks!"
    asked = request(("user", "I saw penguins."), ("assistant", "Nice!"), ("user", "Find what I said about them."))
    text = "".join([c async for c in model.stream(asked)])
    assert text.startswith('<response><action_call name="search">'), "a word of an earlier line grounds it"
    current = ToolSpec(name="current_time", description="", parameters=TimeArgs.model_json_schema())
    default = ToolCall(name="current_time", arguments={"timezone": "UTC"})
    assert grounded(default, current, request(("user", "What day is it?"))), "a default says nothing"
    booking = ToolSpec(name="cancel", description="", parameters={"properties": {"number": {"type": "integer"}}})
    dated = request(("user", "Cancel 20260615."))
    assert not grounded(ToolCall(name="cancel", arguments={"number": 20260614}), booking, dated), "every digit counts"
    assert grounded(ToolCall(name="cancel", arguments={"number": 20260615.0}), booking, dated), "10 is 10.0"


async def test_a_call_copied_from_an_earlier_one_for_a_message_that_asks_for_none_is_left_out(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        if body["max_tokens"] == 16:
            return "search"
        if "tools" in body:
            return '{"name": "search", "arguments": {"words": "Penguins in Oslo "}}'
        return "Fine, thanks!"

    model = scripted_model(tmp_path, reply)
    before = (
        ("user", "Find penguins in Oslo."),
        ("tool_call", '{"name": "search", "arguments": {"words": "penguins in Oslo."}}'),
        ("tool", "nothing found"),
        ("assistant", "I found nothing."),
    )
    greeted = "".join([c async for c in model.stream(request(*before, ("user", "How are you today?")))])
    assert greeted == "Fine, thanks!", "the same call again, nothing of it in the message: a copy"
    again = "".join([c async for c in model.stream(request(*before, ("user", "Look for the penguins once more.")))])
    assert again.startswith('<response><action_call name="search">'), "the message names it: asked again"
    named = "".join([c async for c in model.stream(request(*before, ("user", "Search once more.")))])
    assert named.startswith('<response><action_call name="search">'), "the message names the tool: asked again"
    call = ToolCall(name="search", arguments={"words": "penguins in Oslo"})
    assert not repeated(call, request(("user", "How are you today?"))), "no earlier call: not a copy"
    other = ToolCall(name="search", arguments={"words": "seals in Oslo"})
    assert not repeated(other, request(*before, ("user", "How are you today?"))), "other arguments: a new call"


# -- a bot's own tools: dates, and a request decided as needing none -------------------------------------


CANCEL = ToolSpec(name="cancel_booking", description="Cancels a booking.", parameters=FREE)


def booking(message: str, *, system: str = "You take bookings. Today is Wednesday 2026-06-10.") -> ModelRequest:
    return ModelRequest(
        system=system,
        prompt="",
        plain=True,
        turns=(("user", message),),
        tools=(BOOK, CANCEL),
        max_tokens=64,
        metadata={"context_id": "chat:1"},
    )


async def test_a_call_that_takes_a_date_is_shown_the_days_the_message_names_dated(tmp_path: Path) -> None:
    call = '{"name": "book_table", "arguments": {"date": "2026-06-11", "guests": 2}}'
    model = scripted_model(tmp_path, router_or(call, "book_table"))
    text = "".join([c async for c in model.stream(booking("A table for two tomorrow."))])
    assert (
        text == '<response><action_call name="book_table">{"date": "2026-06-11", "guests": 2}</action_call></response>'
    )
    _, calling = model._server.bodies
    assert calling["messages"][0]["content"] == "You take bookings. Today is Wednesday 2026-06-10.", "system as is"
    (asked,) = [m for m in calling["messages"] if m["role"] == "user"]
    assert asked["content"] == "A table for two tomorrow.\n\n(tomorrow is Thursday 2026-06-11)"
    model._server.bodies.clear()
    undated = booking("A table for two tomorrow.", system="You take bookings.")
    "".join([c async for c in model.stream(undated)])
    assert model._server.bodies[-1]["messages"][1]["content"] == "A table for two tomorrow.", "no today: no days"
    assert model._call_body(booking("Cancel it tomorrow."), CANCEL)["messages"][1]["content"] == "Cancel it tomorrow."
    dated = model._call_body(booking("A table on 2026-06-18."), BOOK)
    assert dated["messages"][1]["content"] == "A table on 2026-06-18.", "no day named: nothing added"


def second_look(answer: str, plain: str = "Which booking do you mean?") -> Callable[[dict[str, Any]], str]:
    def reply(body: dict[str, Any]) -> str:
        if body["max_tokens"] == 16:
            return "none"
        if body["max_tokens"] == 2:  # the second look: does the message ask for this tool?
            return answer
        if "tools" in body:
            return '{"name": "cancel_booking", "arguments": {}}'
        return plain

    return reply


async def test_a_request_decided_as_needing_no_tool_is_asked_about_its_closest_action(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, second_look("yes"))
    text = "".join([c async for c in model.stream(booking("Cancel that booking."))])
    assert text == '<response><action_call name="cancel_booking">{}</action_call></response>'
    _, asked, calling = model._server.bodies
    assert asked["grammar"] == 'root ::= "yes" | "no"\n' and asked["id_slot"] in model._scratch
    assert asked["messages"][-1]["content"].startswith("Tool: cancel_booking(): Cancels a booking.\n")
    assert [t["function"]["name"] for t in calling["tools"]] == ["cancel_booking"]
    declined = scripted_model(tmp_path, second_look("no"))
    assert "".join([c async for c in declined.stream(booking("Cancel that booking."))]) == "Which booking do you mean?"
    assert len(declined._server.bodies) == 3 and "tools" not in declined._server.bodies[-1]
    unrelated = scripted_model(tmp_path, second_look("yes"))
    assert "".join([c async for c in unrelated.stream(booking("Hello there!"))]) == "Which booking do you mean?"
    assert len(unrelated._server.bodies) == 2, "no word in common with any action: not asked"


async def test_an_answer_that_claims_an_action_done_calls_it_only_for_a_request_that_names_it(tmp_path: Path) -> None:
    """Declined twice, the request's plain answer still said it was done: the action is called (it takes no
    arguments: nothing to make up). To a message that shares no word with it, the claim is cut instead."""
    claiming = scripted_model(tmp_path, second_look("no", plain="Done, it is cancelled."))
    text = "".join([c async for c in claiming.stream(booking("Cancel that booking."))])
    assert text == '<response><action_call name="cancel_booking">{}</action_call></response>'
    greeted = scripted_model(tmp_path, second_look("no", plain="Hi! Done, it is cancelled."))
    assert "".join([c async for c in greeted.stream(booking("Hello there!"))]) == "Hi!"
    assert greeted._server.bodies[-1]["temperature"] == 0.0, "written once more, without sampling"


async def test_the_built_in_assistants_tools_get_a_second_look_only_for_a_request_that_names_one(
    tmp_path: Path,
) -> None:
    """The assistant's tools are decided after worked examples of their own, and "I am a vegetarian, please
    remember that." was decided as none (seed 7 of ``bench/quality.py``): a request that says the tool's name is
    asked about it once more; a question (or a message with no tool's name) is not."""
    model = scripted_model(tmp_path, second_look("yes"))
    assert (
        "".join([c async for c in model.stream(request(("user", "Remember this tool?")))])
        == "Which booking do you mean?"
    )
    assert len(model._server.bodies) == 2
    greeted = scripted_model(tmp_path, second_look("yes"))
    assert "".join([c async for c in greeted.stream(request(("user", "I am Ana, hello.")))]) == (
        "Which booking do you mean?"
    )
    assert len(greeted._server.bodies) == 2

    def kept(body: dict[str, Any]) -> str:
        if "tools" in body:
            return '{"name": "remember", "arguments": {"fact": "I am a vegetarian."}}'
        return second_look("yes")(body)

    named = scripted_model(tmp_path, kept)
    text = "".join([c async for c in named.stream(request(("user", "I am a vegetarian, please remember that.")))])
    assert text == '<response><action_call name="remember">{"fact": "I am a vegetarian."}</action_call></response>'
    asked = named._server.bodies[1]
    assert asked["grammar"] == 'root ::= "yes" | "no"\n' and "remember(" in asked["messages"][-1]["content"]


def test_a_clause_of_an_argument_copied_from_the_tool_s_description_is_cut() -> None:
    keep = ToolSpec(name="remember", description="Keeps a fact the person tells you for later conversations.")

    def kept(fact: str, message: str) -> Any:
        return unborrowed(ToolCall(name="remember", arguments={"fact": fact}), keep, message).arguments["fact"]

    message = "I am a vegetarian, please remember that."
    assert kept("You are a vegetarian, so I will keep this fact for later conversations.", message) == (
        "You are a vegetarian."
    )
    assert kept("Ana is my sister.", "Remember that my sister is called Ana.") == "Ana is my sister."
    assert kept("The person's name is Ada", "I am Ada, remember it.") == "The person's name is Ada", "all borrowed"
    assert kept("Tea, for later", "Keep this for later: tea") == "Tea, for later", "the person's own words"
    call = ToolCall(name="remember", arguments={"fact": 3})
    assert unborrowed(call, keep, "three") is call


def test_the_closest_action_shares_the_most_words_and_is_never_an_output() -> None:
    shown = ToolSpec(name="bookings", description="Shows the bookings, cancelled ones too.", output="text")
    assert closest_action("Cancel my booking.", (BOOK, shown, CANCEL)) is CANCEL, "two words against one"
    assert closest_action("The booking, please.", (BOOK, shown, CANCEL)) is BOOK, "a tie: the first listed"
    assert closest_action("Show the bookings.", (shown,)) is None, "an output is not asked about"
    assert closest_action("Good evening!", (BOOK, CANCEL)) is None
    units = ToolSpec(name="convert", description="Converts between units: kg and pounds.", parameters=FREE)
    money = ToolSpec(name="exchange", description="Converts money: euros, pounds sterling.", parameters=FREE)
    assert closest_action("How much is that in pounds?", (units, money)) is units, "a tie: the first listed"
    assert closest_action("How much is that in pounds?", (units, money), earlier="I have 200 euros left.") is money
    assert closest_action("Hello!", (units, money), earlier="I have 200 euros left.") is None, "the message first"


async def test_a_call_after_a_second_look_must_hold_only_what_the_person_said(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        if body["max_tokens"] in (16, 2):
            return "none" if body["max_tokens"] == 16 else "yes"
        if "tools" in body:
            return '{"name": "book_table", "arguments": {"date": "2026-06-10", "guests": 5}}'
        return "Five, noted."

    model = scripted_model(tmp_path, reply)
    assert "".join([c async for c in model.stream(booking("We will be 5 people."))]) == "Five, noted.", "no date said"
    text = "".join([c async for c in model.stream(booking("Book us a table today, 5 people."))])
    assert text.startswith('<response><action_call name="book_table">'), "today dated under the message: said"


@pytest.mark.parametrize(
    ("message", "told"),
    [
        ("The tea needs 4 minutes.", True),
        ("I have 200 euros left.", True),
        ("I\u2019m flying to Lisbon on Friday.", True),
        ("We will be five people.", True),
        ("Je suis à Paris.", True),
        ("Set a timer for 4 minutes.", False),  # a verb first: a request
        ("Ana paid 30 euros for dinner.", False),  # a name first: not told apart from a verb
        ("Is it cold in Helsinki?", False),
        ("I already called the plumber, take it off my list.", False),  # two clauses, the second a request
        ("I'm home. Set a timer for 5 minutes.", False),
        ("I need milk.", False),  # words that ask
        ("I want a timer for 5 minutes, please", False),
        ("", False),
    ],
)
def test_a_remark_is_one_sentence_that_begins_with_its_subject_and_asks_nothing(message: str, told: bool) -> None:
    assert remark(message) is told


def test_each_argument_given_must_share_a_word_or_number_with_what_was_said() -> None:
    call = ToolCall(name="book_table", arguments={"date": "2026-06-13", "guests": 3})
    assert stated(call, BOOK, "Room for 3 on Saturday?\nSaturday is 2026-06-13")
    assert not stated(call, BOOK, "Room for 3 on Saturday?"), "the date from nowhere"
    default = ToolCall(name="book_table", arguments={"date": "2026-06-13", "guests": 3, "area": "inside"})
    assert stated(default, BOOK, "3 of us on 2026-06-13"), "a default says nothing"


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("A table for three on Saturday.\nSaturday is 2026-06-13", True),
        ("Une table pour trois samedi.\nSaturday is 2026-06-13", True),
        ("Einen Tisch für drei am Samstag.\nSaturday is 2026-06-13", True),
        ("A table for two on Saturday.\nSaturday is 2026-06-13", False),
        ("The one on Saturday.\nSaturday is 2026-06-13", False),
    ],
)
def test_a_number_said_in_words_is_the_number_a_call_gives(said: str, told: bool) -> None:
    call = ToolCall(name="book_table", arguments={"date": "2026-06-13", "guests": 3})
    assert stated(call, BOOK, said) is told


class CancelArgs(pydantic.BaseModel):
    booking_id: int = pydantic.Field(ge=1)
    reason_id: int = pydantic.Field(default=0, json_schema_extra={"enum": [0, 7]})
    count: int = 1


CANCEL_BY_ID = ToolSpec(
    name="cancel_booking", description="Cancels a booking.", parameters=CancelArgs.model_json_schema()
)
SHOWN = (
    "You take bookings. Today is Wednesday 2026-06-10, open 12:00 to 23:00.\n\nThe bookings:\n"
    "- number 1: 2026-06-12 at 19:30, 2 people, 12.50 paid\n- number 3: 2026-06-14 at 12:30, 5 people"
)


def test_an_identifier_is_narrowed_to_the_whole_numbers_the_conversation_shows() -> None:
    asked = replace(
        booking("Cancel that booking.", system=SHOWN), turns=(("user", "Not on the 14th."), ("user", "Cancel it."))
    )
    properties = narrowed(CANCEL_BY_ID, asked).parameters["properties"]
    assert properties["booking_id"]["enum"] == [1, 2, 3, 5], "no date's, time's, decimal's or ordinal's digits"
    assert properties["reason_id"]["enum"] == [0, 7], "an enum of its own is the author's"
    assert "enum" not in properties["count"], "not an identifier"
    assert narrowed(CANCEL_BY_ID, booking("Cancel it.", system="You take bookings.")) is CANCEL_BY_ID, "none shown"
    assert narrowed(BOOK, asked) is BOOK
    assert CANCEL_BY_ID.parameters["properties"]["booking_id"].get("enum") is None, "the author's tool unchanged"


async def test_a_call_writes_an_identifier_among_those_shown_and_lists_the_tool_as_written(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, lambda body: "")
    asked = replace(booking("Cancel that booking.", system=SHOWN), tools=(CANCEL_BY_ID,))
    body = model._call_body(asked, CANCEL_BY_ID)
    assert '("1" | "2" | "3" | "5")' in body["grammar"]
    assert body["tools"][0]["function"]["parameters"] == CANCEL_BY_ID.parameters


REMEMBER = ToolSpec(
    name="remember", description="Keeps a fact the person tells you.", parameters=KeptFactArgs.model_json_schema()
)


def test_a_switch_the_person_did_not_name_is_left_to_its_default() -> None:
    """ "Remember that my sister is called Ana." was kept with ``for_everyone`` true (the embedded model turned it on
    unasked): in a group, the fact was recalled for everyone."""
    unasked = replace(booking("Remember that my sister is called Ana."), tools=(REMEMBER,))
    assert set(narrowed(REMEMBER, unasked).parameters["properties"]) == {"fact", "said_by"}
    asked = replace(booking("Remember for everyone here: the meeting is at five."), tools=(REMEMBER,))
    assert narrowed(REMEMBER, asked) is REMEMBER
    assert "for_everyone" in REMEMBER.parameters["properties"], "the author's tool unchanged"


async def test_a_call_cannot_turn_on_a_switch_the_person_did_not_name(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, lambda body: "")
    asked = replace(booking("Remember that my sister is called Ana."), tools=(REMEMBER,))
    body = model._call_body(asked, REMEMBER)
    assert "for_everyone" not in body["grammar"] and "said_by" in body["grammar"]
    assert body["tools"][0]["function"]["parameters"] == REMEMBER.parameters, "listed as written"


async def test_a_call_that_repeats_an_argument_the_message_does_not_say_is_made_with_its_default(
    tmp_path: Path,
) -> None:
    """ "What day of the week is it today?" after a question about Tokyo: the model copied ``Asia/Tokyo``, a repeat
    of the call before, and the bot answered without the tool (the earlier answer copied). The argument has a
    default: the call is made without it, in the chat's own time zone."""
    call = '<tool_call>\n{"name": "current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>'
    model = scripted_model(tmp_path, router_or(call, "current_time"))
    described = "The current date and time. Use it when the user asks about the date, the time or the day of the week."
    clock = replace(TOOLS[1], description=described)
    turns = (
        ("user", "What time is it in Tokyo right now?"),
        ("tool_call", '{"name": "current_time", "arguments": {"timezone": "Asia/Tokyo"}}'),
        ("tool", "It is 19:53 on Tuesday 1 December 2026 in Asia/Tokyo."),
        ("assistant", "It is 19:53 in Tokyo."),
        ("user", "What day of the week is it today?"),
    )
    text = "".join([c async for c in model.stream(replace(request(*turns), tools=(clock,)))])
    assert text == '<response><action_call name="current_time">{}</action_call></response>'
    again = (*turns[:-1], ("user", "And what time is it in Tokyo now?"))
    text = "".join([c async for c in model.stream(replace(request(*again), tools=(clock,)))])
    assert text == '<response><action_call name="current_time">{"timezone": "Asia/Tokyo"}</action_call></response>'
