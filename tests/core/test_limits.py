"""Limits in one process: an input over a limit never reaches the model, its author is told once per window, admins
pass; the token limits read the agent's usage counters, where a model call is charged once per batch and step."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core import (
    InMemoryLimitStore,
    InputRef,
    LimitConfig,
    Limiter,
    ModelRequest,
    ModelUsage,
    ScriptedModel,
    context,
    create_agent,
    output,
)
from core.limits.plugin import Limits
from core.usage import USAGE, day_of
from core.usage.plugin import Usage

chat = context(type="chat", schema=str, key=lambda s: s)


class CountingModel(ScriptedModel):
    """Answers ``ok`` and reports ``read`` tokens read and a fifth of them written per call."""

    def __init__(self, read: int = 100) -> None:
        super().__init__(lambda request: '<response><output type="say">ok</output></response>')
        self.last_usage: ModelUsage | None = None
        self.read = read

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        async for chunk in super().stream(request):
            yield chunk
        self.last_usage = ModelUsage(input_tokens=self.read, output_tokens=self.read // 5)


def _agent(
    config: LimitConfig, store: InMemoryLimitStore | None = None, model: ScriptedModel | None = None
) -> tuple[Any, ScriptedModel, list[str]]:
    said: list[str] = []
    model = model if model is not None else CountingModel()
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: said.append(data), context=chat)],
        plugins=[Usage(), Limits(Limiter(config, store))],
    )
    seen: list[str] = []
    agent.observers.append(lambda kind, cid, value: seen.append(kind) if kind.startswith("limited") else None)
    agent.seen = seen
    return agent, model, said


def _msg(text: str, user: str = "7") -> dict[str, Any]:
    return {"type": "telegram:message", "data": text, "params": {"user": "Ann", "user_id": user}}


async def test_messages_per_minute_refuses_the_rest_with_one_notice() -> None:
    agent, model, said = _agent(LimitConfig(messages_per_minute=2))
    async with agent:
        for i in range(5):
            await agent.send(chat, "c", _msg(f"m{i}"))
        await agent.send(chat, "c", _msg("another user", user="8"))
    assert len(model.requests) == 3  # two of user 7, one of user 8
    assert "m2" not in model.requests[-1].prompt and "m4" not in model.requests[-1].prompt  # never shown later
    notices = [s for s in said if s != "ok"]
    assert len(notices) == 1 and "at most 2 a minute" in notices[0] and "try again in" in notices[0]
    assert agent.seen == ["limited:messages"] * 3


async def test_tokens_per_day_per_user_and_per_conversation() -> None:
    """Each call reports 1,200 tokens (its prompt is estimated at a few hundred): an input is refused once the day's
    tokens reached a limit, and a call is not made when it would pass one (issue 35: bursts)."""
    agent, model, said = _agent(
        LimitConfig(tokens_per_day_user=2000, tokens_per_day_conversation=5000), model=CountingModel(read=1000)
    )
    async with agent:
        await agent.send(chat, "c", _msg("one"))
        await agent.send(chat, "c", _msg("two"))  # 1,200 used: still under 2,000
        await agent.send(chat, "c", _msg("three"))  # 2,400: over
        await agent.send(chat, "c", _msg("four"))  # over again: no second notice today
        assert len(model.requests) == 2
        for user in ("8", "9"):  # the conversation reaches 4,800 with user 8's two messages
            await agent.send(chat, "c", _msg("hi", user=user))
            await agent.send(chat, "c", _msg("hi", user=user))
        assert len(model.requests) == 4  # user 9's call would pass the conversation's 5,000: not made
        await agent.send(chat, "c", _msg("one more", user="9"))  # 4,800 of 5,000: the call would pass it too
    today = [day_of()]  # the limits read the counters /stats shows
    assert (await agent.provided(USAGE).totals("user:telegram:7", today)).tokens == 2400
    assert (await agent.provided(USAGE).totals("chat:chat:c", today)).input_tokens == 4000  # the context chat:c
    assert len(model.requests) == 4
    notices = [s for s in said if s != "ok"]
    assert len(notices) == 2, notices
    assert "you have used up" in notices[0] and "midnight UTC" in notices[0]
    assert "more than what is left of this conversation's daily budget (200 of 5,000)" in notices[1]


async def test_a_long_input_is_refused_and_admins_pass() -> None:
    agent, model, said = _agent(
        LimitConfig(max_input_chars=10, messages_per_minute=1, admins=frozenset({"telegram:1"}))
    )
    async with agent:
        await agent.send(chat, "c", _msg("x" * 11))
        assert model.requests == [] and "too long" in said[0] and "at most 10" in said[0]
        for _ in range(3):
            await agent.send(chat, "c", _msg("y" * 50, user="1"))
    assert len(model.requests) == 3
    assert agent.is_admin("telegram:1") and not agent.is_admin("telegram:7") and not agent.is_admin("")


async def test_the_owner_s_inputs_pass_every_limit() -> None:
    """An input that comes as the owner's (the person at the terminal, whose id ``cli:default`` nobody lists) is
    an operator's, like a listed admin's: neither the message nor the token limits apply to it."""
    agent, model, said = _agent(
        LimitConfig(messages_per_minute=1, tokens_per_day_user=1500, max_input_chars=10), model=CountingModel(read=1000)
    )
    owner = {"type": "telegram:message", "params": {"user_id": "default", "tier": "owner"}, "hidden": ["tier"]}
    async with agent:
        for n in range(3):
            await agent.send(chat, "c", {**owner, "data": f"line {n} of the operator, long"})
        assert len(model.requests) == 3 and said == ["ok"] * 3
        await agent.send(chat, "c", _msg("hi"))
        await agent.send(chat, "c", _msg("hi again"))
    assert len(model.requests) == 4 and "at most 1 a minute" in said[-1]


@pytest.mark.parametrize("batch", ["b1", None])
async def test_a_charge_counts_once_per_batch_and_step(batch: str | None) -> None:
    """A queued batch run again (after a crash) charges its model calls nothing more; runs without a batch are
    separate calls, each charged."""
    agent, model, _ = _agent(LimitConfig(tokens_per_day_user=1000))
    async with agent:
        for _ in range(2):
            ref = InputRef.model_validate(_msg("one") | {"id": "m1"})
            await agent.run(chat, "c", [ref], batch=batch)
    assert len(model.requests) == 2
    used = await agent.provided(USAGE).totals("user:telegram:7", [day_of()])
    assert used.tokens == (120 if batch else 240)


async def test_a_model_that_reports_no_usage_is_charged_about_4_characters_a_token() -> None:
    reply = '<response><output type="say">ok</output></response>'
    probe = ScriptedModel(lambda request: reply)
    measured, _, _ = _agent(LimitConfig(), model=probe)
    async with measured:
        await measured.send(chat, "c", _msg("one"))
    first = (len(probe.requests[0].system) + len(probe.requests[0].prompt)) // 4 + len(reply) // 4
    model = ScriptedModel(lambda request: reply)
    agent, _, said = _agent(LimitConfig(tokens_per_day_conversation=first), model=model)  # one call's worth
    async with agent:
        await agent.send(chat, "c", _msg("one"))
        await agent.send(chat, "c", _msg("two"))
    request = model.requests[0]
    used = await agent.provided(USAGE).totals("chat:chat:c", [day_of()])
    assert used.input_tokens == (len(request.system) + len(request.prompt)) // 4 >= 50
    assert used.tokens == first
    assert used.output_tokens == len(reply) // 4
    assert len(model.requests) == 1 and "this conversation has used up" in said[-1]


async def test_a_message_keeps_its_place_however_often_its_batch_runs() -> None:
    store = InMemoryLimitStore()
    assert await store.count_message(user="telegram:7", message_id="m1", minute=5) == 1
    assert await store.count_message(user="telegram:7", message_id="m2", minute=5) == 2
    for _ in range(3):  # m1's batch run again after others came: still the first
        assert await store.count_message(user="telegram:7", message_id="m1", minute=5) == 1
    assert await store.count_message(user="telegram:7", message_id="m3", minute=5) == 3


def test_token_limits_with_nothing_counting_tokens_are_refused_as_the_agent_is_built() -> None:
    """Without the Usage plugin nothing counts tokens: a token limit would never be reached, silently."""
    from core.errors import DefinitionError

    config = LimitConfig(tokens_per_day_user=1000)
    with pytest.raises(DefinitionError, match=r"add core\.usage\.Usage\(\) to its plugins"):
        create_agent(model=ScriptedModel([]), contexts=[chat], plugins=[Limits(Limiter(config))])
    create_agent(model=ScriptedModel([]), contexts=[chat], plugins=[Limits(Limiter(config)), Usage()])  # any order
    create_agent(
        model=ScriptedModel([]), contexts=[chat], plugins=[Limits(Limiter(LimitConfig(messages_per_minute=3)))]
    )
