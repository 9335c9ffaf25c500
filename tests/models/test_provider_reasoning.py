"""A provider's own reasoning as ``reasoning`` run events (issue 39): the reasoning deltas of an OpenAI-compatible
server (``reasoning_content``, ``reasoning``) and the thinking blocks of Anthropic's API, each from a fake server of
that API on loopback, reach the run's stream as reasoning, apart from the answer, which is unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from core import RunEvent, context, create_agent, output
from core.models import AnthropicModel, Model, RetryPolicy
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer, Reply

chat = context(type="chat", schema=str, key=lambda user: user)
ANSWER = ('<response><output type="chat:message">', "It is 4.", "</output></response>")
THOUGHTS = ("The user asks 2+2. ", "That is 4.")


async def run(model: Model, **stream: Any) -> list[RunEvent]:
    sent: list[str] = []
    reply = output(type="chat:message", handler=lambda text, ctx, agent: sent.append(text))
    agent = create_agent(model=model, contexts=[chat], outputs=[reply])
    async with agent:
        events = [e async for e in agent.stream(chat, "u", {"type": "chat:message", "data": "2+2?"}, **stream)]
    assert sent == ["It is 4."]  # the answer is the answer, whatever the model thought
    return events


def reasoning(events: list[RunEvent]) -> list[str]:
    return [e.content for e in events if e.type == "reasoning"]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_openai_compatible_reasoning_deltas_are_reasoning_events(field: str) -> None:
    async with FakeOpenAIServer(default=Reply(chunks=ANSWER, reasoning=THOUGHTS, reasoning_field=field)) as server:
        model = server.model("thinker")
        try:
            events = await run(model)
        finally:
            await model.aclose()
    assert reasoning(events) == list(THOUGHTS)
    first = next(i for i, e in enumerate(events) if e.type == "reasoning")
    assert events[first].is_type_switched and all(e.type == "reasoning" for e in events[first : first + 2])
    assert "".join(e.content for e in events if e.type == "output_text") == "It is 4."


async def test_openai_compatible_reasoning_is_left_out_on_request() -> None:
    async with FakeOpenAIServer(default=Reply(chunks=ANSWER, reasoning=THOUGHTS)) as server:
        model = server.model("thinker")
        try:
            events = await run(model, reasoning=False)
        finally:
            await model.aclose()
    assert reasoning(events) == []


async def test_anthropic_thinking_blocks_are_reasoning_events() -> None:
    async with FakeAnthropicServer(api_key="sk-ant-x", default=Reply(chunks=ANSWER, reasoning=THOUGHTS)) as server:
        model = AnthropicModel(
            api_key="sk-ant-x", model="claude-fake", base_url=server.url, retry=RetryPolicy(retries=0)
        )
        try:
            events = await run(model)
        finally:
            await model.aclose()
    assert reasoning(events) == list(THOUGHTS)
    assert "thinking" not in server.requests[0].body  # asked for only with a budget


async def test_anthropic_asks_for_thinking_with_a_budget() -> None:
    async with FakeAnthropicServer(api_key="sk-ant-x", default=Reply(chunks=ANSWER, reasoning=THOUGHTS)) as server:
        model = AnthropicModel(
            api_key="sk-ant-x",
            model="claude-fake",
            base_url=server.url,
            retry=RetryPolicy(retries=0),
            thinking_budget=2048,
        )
        try:
            events = await run(model)
        finally:
            await model.aclose()
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048
    assert reasoning(events) == list(THOUGHTS)
