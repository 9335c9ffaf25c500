"""``_outputPath`` and ``†`` references through the step loop."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core import ActionResult, InMemoryStore, ScriptedModel, action, context, create_agent, output

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=3)


class Summarise(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    text: str
    output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")


class Weather(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    city: str
    output_path: Literal["†state.weather"] = Field(default="†state.weather", alias="_outputPath")


class Echo(BaseModel):
    value: Any


def R(body: str) -> str:
    return f"<response>{body}</response>"


def build(replies: list[str], memory: Any = None) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(replies)
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[
            action(name="summarise", schema=Summarise, handler=lambda a, c, g: {"summary": a.text.upper()}),
            action(name="weather", schema=Weather, handler=lambda a, c, g: {"city": a.city, "sky": "sunny"}),
            action(name="echo", schema=Echo, handler=lambda a, c, g: a.value),
            action(name="plain", handler=lambda a, c, g: "ok"),
        ],
        outputs=[output(type="chat:message")],
        memory=memory or InMemoryStore(),
    )
    return agent, model


def results(chain: list[Any]) -> list[Any]:
    return [(c.name, c.data, c.error) for c in chain if isinstance(c, ActionResult)]


async def test_flexible_and_fixed_paths_save_results_and_the_model_sees_only_folded_state() -> None:
    agent, model = build(
        [
            R(
                '<action_call name="summarise">{"text": "hi", "_outputPath": "†state.user.summary"}</action_call>'
                '<action_call name="weather">{"city": "Paris"}</action_call>'
            ),
            R(""),
        ]
    )
    async with agent:
        await agent.send(chat, "u", {"type": "chat:message", "data": "x"})
        state = await agent.load_state(chat, "u")
    assert state.state_log.resolve(("state", "user", "summary")) == (True, {"summary": "HI"})
    assert state.state_log.resolve(("state", "weather", "sky")) == (True, "sunny")
    prompt = model.requests[1].prompt
    assert (
        '<state>{"state": {"user": {"summary": {"summary": "HI"}}, "weather": {"city": "Paris", "sky": "sunny"}}}'
        in prompt
    )
    assert '"_call"' not in prompt and '"_date"' not in prompt


async def test_a_reference_waits_for_an_earlier_call_of_the_same_response() -> None:
    agent, _ = build(
        [
            R(
                '<action_call name="summarise">{"text": "abc", "_outputPath": "†state.s"}</action_call>'
                '<action_call name="echo">{"value": "†state.s.summary"}</action_call>'
            ),
            R(""),
        ]
    )
    async with agent:
        chain = await agent.send(chat, "u", {"type": "chat:message", "data": "x"})
    assert ("echo", "ABC", None) in results(chain)


async def test_state_survives_runs_and_merge_push_combine() -> None:
    memory = InMemoryStore()
    agent, _ = build(
        [
            R(
                '<action_call name="summarise">{"text": "a", "_outputPath": "†state.items", "_outputMethod": "push"}</action_call>'
            ),
            R(""),
            R(
                '<action_call name="summarise">{"text": "b", "_outputPath": "†state.items", "_outputMethod": "push"}</action_call>'
                '<action_call name="echo">{"value": "†state.items"}</action_call>'
            ),
            R(""),
        ],
        memory=memory,
    )
    async with agent:
        await agent.send(chat, "u", {"type": "chat:message", "data": "1"})
        chain = await agent.send(chat, "u", {"type": "chat:message", "data": "2"})
    assert ("echo", [{"summary": "A"}, {"summary": "B"}], None) in results(chain)


async def test_bad_paths_and_dangling_references_are_error_results_not_hangs() -> None:
    agent, model = build(
        [
            R(
                '<action_call name="summarise">{"text": "a", "_outputPath": "state.nomark"}</action_call>'
                '<action_call name="weather">{"city": "x", "_outputPath": "†state.elsewhere"}</action_call>'
                '<action_call name="echo">{"value": "†state.never.written"}</action_call>'
                '<action_call name="plain">{"_outputPath": "†state.p"}</action_call>'
            ),
            R(""),
        ]
    )
    async with agent:
        chain = await agent.send(chat, "u", {"type": "chat:message", "data": "x"})
    errors = [r[2] for r in results(chain)]
    assert "String should match pattern" in errors[0]
    assert "Input should be '†state.weather'" in errors[1]
    assert "†state.never.written has no value" in errors[2]
    assert "takes no _outputPath" in errors[3]
    assert len(model.requests) == 2
