"""A tool call's start, prefilled (issue 55): what the grammar fixes of a call (the tags, the tool's name, the first
key when the arguments always start with it) is given at the end of the prompt as the assistant's turn begun, so
llama.cpp evaluates it with the prompt instead of writing it token by token; the model writes only the rest.

The grammar of the rest is checked by llama.cpp itself with the small SmolLM2 (the prefilled start too: llama.cpp
appends a trailing assistant message to the prompt); the adapter's flow against the scripted server of
``test_tool_calls``.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest

from core.models import LocalModel
from core.models.base import ToolSpec
from core.models.grammar import TOOL_CALL_OPEN, parse_tool_call, tool_call_grammar, tool_call_start

from .test_tool_calls import SCHEMAS, TOOLS, request, router_or, scripted_model


class BookArgs(pydantic.BaseModel):
    date: datetime.date
    time: datetime.time
    guests: int = pydantic.Field(ge=1, le=12)
    area: Literal["inside", "terrace", "bar"] = "inside"


BOOK = ToolSpec(name="book_table", description="Books a table.", parameters=BookArgs.model_json_schema())
NO_ARGS = ToolSpec(name="ping", description="Pings.", parameters={})


@pytest.mark.parametrize(
    ("tool", "start", "rest"),
    [
        (TOOLS[0], '{"name": "remember", "arguments": {"fact":', ' "cat: Miso"}}'),  # a required member
        (TOOLS[1], '{"name": "current_time", "arguments": {"timezone":', ' "UTC"}}'),  # the only member
        (TOOLS[2], '{"name": "search", "arguments":', ' {"limit": 3}}'),  # several optional ones: any first
        (NO_ARGS, '{"name": "ping", "arguments":', " {}}"),
        (BOOK, '{"name": "book_table", "arguments": {"date":', ' "2026-06-12", "time": "19:30", "guests": 2}}'),
    ],
)
def test_a_call_s_start_is_what_its_grammar_fixes_and_the_rest_completes_it(
    tool: ToolSpec, start: str, rest: str
) -> None:
    fixed, grammar = tool_call_start(tool)
    assert fixed == f"{TOOL_CALL_OPEN}\n{start}", "it ends after a colon: the model's next token is its own"
    call = parse_tool_call(fixed + rest)
    assert call is not None and call.name == tool.name
    assert json.loads(f"{start}{rest}")["arguments"] == call.arguments
    root = grammar.split("\n")[0]
    assert root.startswith("root ::= ") and root.endswith('ws "}"'), "the rest ends with the call's object"
    assert "<tool_call>" not in grammar and tool.name not in grammar, "the grammar does not write the start again"


def test_a_call_s_start_keeps_the_grammar_s_bounds_on_the_rest() -> None:
    _, whole = tool_call_start(BOOK)
    assert '"\\"" [12] [0-9]{3,3} "-"' in whole, "the date still digit by digit"
    assert '"\\"time\\"" ws ":" ws' in whole and '("\\"inside\\"" | "\\"terrace\\"" | "\\"bar\\"")' in whole
    assert tool_call_grammar((BOOK,), text=False).count("[12] [0-9]{3,3}") == whole.count("[12] [0-9]{3,3}")


async def test_the_model_writes_only_the_rest_and_the_call_is_the_two_joined(tmp_path: Path) -> None:
    """A scripted model that writes only what follows the prefilled start, as llama.cpp's does."""

    def reply(body: dict[str, Any]) -> str:
        if body["max_tokens"] == 16:
            return "current_time"
        assert body["messages"][-1]["role"] == "assistant", "the call's start ends the prompt"
        return ' "Asia/Tokyo"}}'

    model = scripted_model(tmp_path, reply)
    text = "".join([c async for c in model.stream(request(("user", "Time in Tokyo?")))])
    assert text == '<response><action_call name="current_time">{"timezone": "Asia/Tokyo"}</action_call></response>'
    calling = model._server.bodies[-1]
    assert calling["messages"][-2]["role"] == "user" and calling["id_slot"] in model._scratch


async def test_a_call_written_once_more_after_an_error_is_prefilled_too(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        assert body["messages"][-1] == {
            "role": "assistant",
            "content": f'{TOOL_CALL_OPEN}\n{{"name": "remember", "arguments": {{"fact":',
        }
        return ' "I like tea"}}'

    model = scripted_model(tmp_path, reply)
    turns = (
        ("user", "Remember that I like tea."),
        ("tool_call", '{"name": "remember", "arguments": {"fact": " "}}'),
        ("tool", "error: fact is empty"),
    )
    failed = replace(request(*turns), tools=TOOLS[:1])  # no other tool to choose: the same one, written again
    text = "".join([c async for c in model.stream(failed)])
    assert text == '<response><action_call name="remember">{"fact": "I like tea"}</action_call></response>'
    (calling,) = model._server.bodies
    assert "error: fact is empty" in calling["messages"][-2]["content"], "the error in view"


def test_a_call_of_one_of_several_tools_is_written_whole(tmp_path: Path) -> None:
    model = scripted_model(tmp_path, router_or("", "none"))
    body = model._call_body(request(("user", "Hi")), *TOOLS)
    assert body["messages"][-1]["role"] == "user" and body["grammar"].startswith("root ::= tool-call\n")


async def test_llama_cpp_continues_a_prefilled_start_under_the_rest_s_grammar(local_model: LocalModel) -> None:
    """llama.cpp with SmolLM2 at temperature 1.2: after each tool's start, the rest's grammar alone shapes the
    arguments, and the start joined to what was written is a call its schema accepts."""
    await local_model.load()
    for tool in (*TOOLS, BOOK):
        start, grammar = tool_call_start(tool)
        for seed in range(3):
            body = {
                "messages": [
                    {"role": "user", "content": f"Call {tool.name} for me, please."},
                    {"role": "assistant", "content": start},
                ],
                "grammar": grammar,
                "max_tokens": 512,  # strings are bounded (200 characters): the call always ends
                "temperature": 1.2,
                "seed": seed,
                "stream": True,
            }
            written = await local_model._collect(local_model._server, body)
            assert not written.startswith(TOOL_CALL_OPEN), written
            call = parse_tool_call(start + written)
            assert call is not None and call.name == tool.name, start + written
            schema = BookArgs if tool is BOOK else SCHEMAS[tool.name]
            schema.model_validate({**call.arguments, "date": "2026-06-12"} if tool is BOOK else call.arguments)
