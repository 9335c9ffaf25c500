"""Acts of Emergence 008 through the step loop: fixed methods, references inside text, expressions in
references and output paths, deferred references, instancing, and seeding and reading the state."""

from __future__ import annotations

import re
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from core import (
    ActionResult,
    InMemoryStore,
    InputRef,
    ScriptedModel,
    action,
    context,
    create_agent,
    data_input,
    output,
    read_state,
    write_state,
)
from core.schema import external_schema

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=3)


class Note(BaseModel):
    """Flexible path; the method is fixed to push as a pydantic private attribute (the form the issue names)."""

    text: str
    _outputPath: str = "†state.notes"
    _outputMethod: Literal["push"] = "push"


class Tag(BaseModel):
    """The method fixed as a real field aliased ``_outputMethod``."""

    model_config = ConfigDict(populate_by_name=True)
    tag: str
    output_path: str = Field(default="†state.tags", alias="_outputPath", pattern="^†")
    output_method: Literal["push"] = Field(default="push", alias="_outputMethod")


class Save(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    value: Any
    output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")


class Echo(BaseModel):
    value: Any


class Peek(BaseModel):
    path: str


class City(BaseModel):
    city: str
    output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")


def R(body: str) -> str:
    return f"<response>{body}</response>"


def call(name: str, body: str) -> str:
    return f'<action_call name="{name}">{body}</action_call>'


def weather(args: City, ctx: Any, agent: Any) -> dict[str, str]:
    if args.city == "Nowhere":
        raise LookupError("no such city")
    return {"city": args.city, "sky": "snow" if args.city == "Oslo" else "sunny"}


def build(
    replies: list[str], *, seen: list[Any] | None = None, extra: tuple[Any, ...] = (), **model_kw: Any
) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(replies, **model_kw)
    sink = seen if seen is not None else []
    ext_schema = external_schema(
        {
            "type": "object",
            "properties": {
                "x": {"type": "string"},
                "_outputPath": {"type": "string", "const": "†state.ext"},
                "_outputMethod": {"type": "string", "const": "merge"},
            },
        }
    )
    agent = create_agent(
        model=model,
        contexts=[chat],
        inputs=[data_input()],
        actions=[
            action(name="note", schema=Note, handler=lambda a, c, g: a.text),
            action(name="tag", schema=Tag, handler=lambda a, c, g: a.tag),
            action(name="save", schema=Save, handler=lambda a, c, g: a.value),
            action(name="echo", schema=Echo, handler=lambda a, c, g: a.value),
            action(name="ext", schema=ext_schema, handler=lambda a, c, g: {a["x"]: True}),
            action(name="weather", schema=City, handler=weather),
            action(name="peek", schema=Peek, handler=lambda a, c, g: sink.append(read_state(c.state, "†" + a.path))),
            *extra,
        ],
        outputs=[output(type="chat:message")],
        memory=InMemoryStore(),
    )
    return agent, model


def results(chain: list[Any]) -> list[tuple[str, Any, str | None]]:
    return [(c.name, c.data, c.error) for c in chain if isinstance(c, ActionResult)]


async def run(agent: Any, *, key: str = "u") -> tuple[list[Any], Any]:
    async with agent:
        chain = await agent.send(chat, key, {"type": "chat:message", "data": "go"})
        state = await agent.load_state(chat, key)
    return chain, state


# -- 1. a method fixed in the schema is kept ---------------------------------------------------------------


async def test_a_method_fixed_as_a_private_attribute_pushes_instead_of_overwriting() -> None:
    agent, _ = build([R(call("note", '{"text": "a"}') + call("note", '{"text": "b"}')), R("")])
    _, state = await run(agent)
    assert state.state_log.resolve(("state", "notes")) == (True, ["a", "b"])
    assert [e.method for e in state.state_log.entries] == ["push", "push"]


async def test_a_method_fixed_as_a_field_is_kept_and_a_contradiction_is_an_error() -> None:
    agent, _ = build(
        [
            R(
                call("tag", '{"tag": "x"}')
                + call("tag", '{"tag": "y", "_outputMethod": "push"}')
                + call("tag", '{"tag": "z", "_outputMethod": "set"}')
            ),
            R(""),
        ]
    )
    chain, state = await run(agent)
    assert state.state_log.resolve(("state", "tags")) == (True, ["x", "y"])
    assert "always saves with _outputMethod 'push', not 'set'" in (results(chain)[2][2] or "")


async def test_a_const_method_in_a_json_schema_is_kept_and_a_contradiction_is_refused() -> None:
    agent, _ = build(
        [
            R(
                call("ext", '{"x": "a"}')
                + call("ext", '{"x": "b"}')
                + call("ext", '{"x": "c", "_outputMethod": "set"}')
            ),
            R(""),
        ]
    )
    chain, state = await run(agent)
    assert state.state_log.resolve(("state", "ext")) == (True, {"a": True, "b": True})
    assert "always saves with _outputMethod 'merge', not 'set'" in (results(chain)[2][2] or "")


async def test_a_private_fixed_path_refuses_another_path() -> None:
    agent, _ = build([R(call("note", '{"text": "a", "_outputPath": "†state.elsewhere"}')), R("")])
    chain, state = await run(agent)
    assert "always saves to †state.notes" in (results(chain)[0][2] or "")
    assert state.state_log.entries == []


# -- 2. references inside longer text -------------------------------------------------------------------------


async def test_a_reference_inside_text_is_replaced_in_place() -> None:
    agent, _ = build(
        [
            R(
                call("save", '{"value": {"name": "Ada", "age": 36}, "_outputPath": "†state.user"}')
                + call("echo", '{"value": "Hello †state.user.name (†state.user.age), you are †state.user."}')
            ),
            R(""),
        ]
    )
    chain, _ = await run(agent)
    assert ("echo", 'Hello Ada (36), you are {"name": "Ada", "age": 36}.', None) in results(chain)


async def test_a_missing_reference_inside_text_is_an_error_naming_it() -> None:
    agent, _ = build([R(call("echo", '{"value": "Hi †state.nobody!"}')), R("")])
    chain, _ = await run(agent)
    error = results(chain)[0][2] or ""
    assert "†state.nobody has no value" in error and "no call of this response writes it" in error


# -- 3. deferred references -------------------------------------------------------------------------------------


DEFERRED = R(
    call("echo", '{"value": "†state.later.sky"}') + call("weather", '{"city": "Paris", "_outputPath": "†state.later"}')
)


async def test_a_reference_to_a_value_a_later_call_writes_waits_for_it_when_parsed_together() -> None:
    agent, _ = build([DEFERRED, R("")], chunk_size=10_000)
    chain, _ = await run(agent)
    assert ("echo", "sunny", None) in results(chain)


async def test_a_deferred_reference_waits_even_when_the_writer_is_not_parsed_yet() -> None:
    agent, _ = build([DEFERRED, R("")], chunk_size=8, delay=0.001)
    chain, _ = await run(agent)
    assert ("echo", "sunny", None) in results(chain)


async def test_a_reference_nothing_in_the_response_writes_is_a_clear_error() -> None:
    agent, model = build([R(call("echo", '{"value": "†state.never"}') + call("echo", '{"value": 1}')), R("")])
    chain, _ = await run(agent)
    error = results(chain)[0][2] or ""
    assert "†state.never has no value" in error and "no call of this response writes it" in error
    assert len(model.requests) == 2


async def test_calls_that_read_each_other_fail_with_the_cycle_named_instead_of_hanging() -> None:
    agent, _ = build(
        [
            R(
                call("save", '{"value": "†state.b", "_outputPath": "†state.a"}')
                + call("save", '{"value": "†state.a", "_outputPath": "†state.b"}')
            ),
            R(""),
        ],
        chunk_size=10_000,
    )
    chain, state = await run(agent)
    errors = [r[2] or "" for r in results(chain)]
    assert any("wait for each other" in e for e in errors)
    assert all(e for e in errors)
    assert state.state_log.entries == []


async def test_a_template_and_a_reference_that_wait_for_each_other_fail_instead_of_hanging() -> None:
    agent, _ = build(
        [
            R(
                call("echo", '{"value": "†state.x"}')
                + call("save", '{"value": "{{calls[0]}}", "_outputPath": "†state.x"}')
            ),
            R(""),
        ],
        chunk_size=10_000,
    )
    chain, _ = await run(agent)
    errors = {r[0]: r[2] or "" for r in results(chain)}
    assert "wait for each other (save -> echo -> save)" in errors["save"]
    assert errors["echo"].startswith("†state.x has no value: the call that writes it (save) failed: these calls wait")


# -- 4. expressions ---------------------------------------------------------------------------------------------


async def test_or_in_a_reference_takes_the_first_that_has_a_value_and_and_takes_the_last() -> None:
    agent, _ = build(
        [
            R(
                call("save", '{"value": "B", "_outputPath": "†state.b"}')
                + call("save", '{"value": "C", "_outputPath": "†state.c"}')
                + call("echo", '{"value": "†state.a || †state.b"}')
                + call("echo", '{"value": "†state.b && †state.c"}')
                + call("echo", '{"value": "†state.a && †state.b || †state.c"}')
                + call("echo", '{"value": "†state.a && †state.c"}')
            ),
            R(""),
        ],
        chunk_size=10_000,
    )
    chain, _ = await run(agent)
    echoes = [r for r in results(chain) if r[0] == "echo"]
    assert echoes[:3] == [("echo", "B", None), ("echo", "C", None), ("echo", "C", None)]
    assert "has no value" in (echoes[3][2] or "")


async def test_and_in_an_output_path_writes_both_and_or_fills_the_first_empty_one() -> None:
    agent, _ = build(
        [
            R(
                call("save", '{"value": 1, "_outputPath": "†state.x && †state.y"}')
                + call("save", '{"value": "first", "_outputPath": "†state.draft || †state.final"}')
            ),
            R(
                call("save", '{"value": "second", "_outputPath": "†state.draft || †state.final"}')
                + call("save", '{"value": "third", "_outputPath": "†state.draft || †state.final"}')
            ),
            R(""),
        ]
    )
    chain, state = await run(agent)
    log = state.state_log
    assert log.resolve(("state", "x")) == (True, 1) and log.resolve(("state", "y")) == (True, 1)
    assert log.resolve(("state", "draft")) == (True, "first")
    assert log.resolve(("state", "final")) == (True, "second")
    third = [r for r in results(chain) if r[2]]
    assert len(third) == 1 and "every alternative of †state.draft || †state.final already holds a value" in (
        third[0][2] or ""
    )
    assert "third" in (third[0][2] or "")


async def test_a_malformed_expression_is_a_validation_error() -> None:
    agent, _ = build([R(call("save", '{"value": 1, "_outputPath": "†state.x || nope"}')), R("")])
    chain, state = await run(agent)
    assert "is not a state path or expression" in (results(chain)[0][2] or "")
    assert state.state_log.entries == []


# -- 5. instancing -------------------------------------------------------------------------------------------------


async def test_an_instanced_call_runs_each_copy_and_gathers_the_results_in_order() -> None:
    agent, model = build(
        [
            R(
                call(
                    "weather",
                    '{"city": "?", "_instances": [{"city": "Paris"}, {"city": "Oslo"}], "_outputPath": "†state.w"}',
                )
                + call("echo", '{"value": "†state.w"}')
            ),
            R(""),
        ]
    )
    chain, state = await run(agent)
    expected = [{"city": "Paris", "sky": "sunny"}, {"city": "Oslo", "sky": "snow"}]
    assert ("weather", expected, None) in results(chain)
    assert ("echo", expected, None) in results(chain)
    assert state.state_log.resolve(("state", "w", "sky")) == (False, None)
    assert "(saved to †state.w)" in model.requests[1].prompt


async def test_instances_may_come_from_the_state_and_a_failing_copy_keeps_the_others() -> None:
    agent, _ = build(
        [
            R(
                call("save", '{"value": [{"city": "Rome"}, {"city": "Nowhere"}], "_outputPath": "†state.jobs"}')
                + call("weather", '{"city": "?", "_instances": "†state.jobs", "_outputPath": "†state.w"}')
                + call("echo", '{"value": 1, "_instances": 3}')
                + call("weather", '{"city": "?", "_instances": [{"city": "Nowhere"}]}')
            ),
            R(""),
        ]
    )
    chain, state = await run(agent)
    weather = [r for r in results(chain) if r[0] == "weather"]
    assert weather[0] == (
        "weather",
        [{"city": "Rome", "sky": "sunny"}, {"error": "'weather' raised LookupError: no such city"}],
        None,
    )
    assert state.state_log.resolve(("state", "w")) == (True, weather[0][1])
    assert "every copy of 'weather' failed: copy 0: 'weather' raised LookupError" in (weather[1][2] or "")
    assert ("echo", [1, 1, 1], None) in results(chain)


async def test_bad_instances_are_refused() -> None:
    agent, _ = build(
        [R(call("echo", '{"value": 1, "_instances": 0}') + call("echo", '{"value": 1, "_instances": "x"}')), R("")]
    )
    chain, _ = await run(agent)
    errors = [r[2] or "" for r in results(chain)]
    assert "_instances must be between 1 and" in errors[0]
    assert "_instances must be a number of copies or a list of objects" in errors[1]


# -- 6. seeding and reading the state -------------------------------------------------------------------------------


async def test_a_data_message_seeds_the_state_and_a_handler_reads_it() -> None:
    seen: list[Any] = []
    agent, model = build(
        [
            R(""),
            R(""),
            R(
                call("peek", '{"path": "data.user.name"}')
                + call("peek", '{"path": "data.user.status"}')
                + call("echo", '{"value": "†data.user.name is †data.user.status"}')
            ),
            R(""),
        ],
        seen=seen,
    )
    async with agent:
        await agent.send(chat, "u", {"type": "data", "data": {"user": {"name": "Alex", "status": "active"}}})
        await agent.send(chat, "u", {"type": "data", "data": "inactive", "params": {"path": "†data.user.status"}})
        chain = await agent.send(chat, "u", {"type": "chat:message", "data": "go"})
        state = await agent.load_state(chat, "u")
    assert seen == ["Alex", "inactive"]
    assert ("echo", "Alex is inactive", None) in results(chain)
    assert read_state(state, "†data.user.name") == "Alex"
    assert read_state(state, "†data.user.status") == "inactive"
    assert read_state(state, "†data.nobody || †data.user.name") == "Alex"
    assert read_state(state, "†data.nobody", None) is None
    with pytest.raises(KeyError, match=re.escape("†data.nobody has no value")):
        read_state(state, "†data.nobody")
    assert "data written to †data.user.status (set)" in model.requests[1].prompt


async def test_a_handler_reads_and_writes_paths_and_a_bad_data_message_is_shown_not_raised() -> None:
    seen: list[Any] = []

    def remember(args: Any, ctx: Any, agent: Any) -> str:
        write_state(ctx.state, "†state.seen", args.value, method="push")
        seen.append(read_state(ctx.state, "†state.seen"))
        return "ok"

    agent, _ = build(
        [R(""), R(call("remember", '{"value": 1}') + call("remember", '{"value": 2}')), R("")],
        extra=(action(name="remember", schema=Echo, handler=remember),),
    )
    async with agent:
        await agent.send(chat, "u", InputRef(type="data", data=1, params={"method": "bogus"}))
        await agent.send(chat, "u", {"type": "chat:message", "data": "go"})
        state = await agent.load_state(chat, "u")
    assert read_state(state, "†state.seen") == [1, 2]
    assert seen[-1] == [1, 2]
    assert read_state(state, "†data", None) is None
