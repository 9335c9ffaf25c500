"""Limits hold per batch (issue 35): a burst sent while the model is slow is answered in runs of at most
``max_batch`` inputs, and no model call sends more tokens than what is left of a day's budget; every message is
answered or its author told why not; a summary is charged to the conversation like any other call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core import (
    AgentOptions,
    InMemoryStore,
    InputRef,
    LimitConfig,
    Limiter,
    ScriptedModel,
    context,
    create_agent,
    output,
)
from core.limits.plugin import Limits
from core.memory import SQLiteHistory
from core.memory.long_memory import LongMemory
from core.summary import SUMMARIZER, SummaryPolicy
from core.usage import InMemoryUsage, day_of
from core.usage.plugin import Usage

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=2)


def slow_model() -> ScriptedModel:
    """Answers each call with one reply after a pause (the burst piles up meanwhile); keeps every request."""
    return ScriptedModel(
        lambda request: '<response><output type="say">ok</output></response>', repeat_last=True, first_delay=0.05
    )


def said(i: int, user: str = "7") -> InputRef:
    return InputRef(type="chat:message", data=f"message number {i} " + "words " * 40, params={"user_id": user})


async def burst(agent: object, count: int) -> list[list[object]]:
    """Send ``count`` messages at once; the chains of the runs that answered them (each once)."""
    send = agent.send  # type: ignore[attr-defined]
    chains = await asyncio.gather(*(send(chat, "c", said(i)) for i in range(count)))
    return list({id(chain): chain for chain in chains}.values())


async def test_a_burst_is_answered_in_runs_of_at_most_max_batch_inputs() -> None:
    model, posted = slow_model(), []
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: posted.append(data))],
        memory=InMemoryStore(),
        options=AgentOptions(max_batch=10),
    )
    async with agent:
        runs = await burst(agent, 300)
    taken = [sum(isinstance(entry, InputRef) for entry in chain) for chain in runs]
    assert sum(taken) == 300 and max(taken) <= 10
    assert len(model.requests) >= 30 and len(posted) == len(model.requests)  # each run answered


async def test_no_model_call_sends_more_tokens_than_the_budget_allows() -> None:
    model, posted = slow_model(), []
    budget = 5000
    usage = InMemoryUsage()
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: posted.append(data), context=chat)],
        memory=InMemoryStore(),
        plugins=[
            Usage(usage),
            Limits(Limiter(LimitConfig(tokens_per_day_user=budget, tokens_per_day_conversation=budget))),
        ],
        options=AgentOptions(max_batch=50),
    )
    async with agent:
        await burst(agent, 300)
    sent = [(len(r.system) + len(r.prompt)) // 4 for r in model.requests]
    assert sent and max(sent) <= budget
    assert sum(sent) <= budget  # the day's budget held across the burst
    spent = await usage.totals("user:chat:7", [day_of()])
    assert spent.tokens <= budget + 200  # (the replies' own tokens on top of what was sent)
    notices = [text for text in posted if text.startswith("Sorry")]
    assert notices, "the author is told why the rest is not answered"
    assert any(text == "ok" for text in posted)


async def test_a_summary_is_charged_to_the_conversation(tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "history.sqlite3")
    usage = InMemoryUsage()
    model = ScriptedModel(
        lambda request: (
            "A short summary."
            if "summar" in request.system.lower()
            else '<response><output type="say">ok</output></response>'
        ),
        repeat_last=True,
    )
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        memory=InMemoryStore(),
        plugins=[Usage(usage), LongMemory(history, summary=SummaryPolicy(every=2, keep=2, timeout=5))],
    )
    async with agent:
        for i in range(6):
            await agent.send(chat, "c", said(i))
        assert agent.provided(SUMMARIZER) is not None
        await agent.provided(SUMMARIZER).idle()
        folds = agent.provided(SUMMARIZER).folds
    assert folds >= 1
    totals = await usage.totals("chat:chat:c", [day_of()])
    runs_only = await usage.totals("user:chat:7", [day_of()])
    assert totals.tokens > runs_only.tokens  # the folds are counted to the conversation, not to a user


@pytest.mark.parametrize(
    ("config", "why", "when"),
    [
        (LimitConfig(max_input_chars=100), "too long", "shorter"),
        (LimitConfig(messages_per_minute=20), "faster than I can answer", "try again in"),
    ],
    ids=["too-long", "too-fast"],
)
async def test_a_burst_over_the_limits_gets_one_short_notice_saying_what_was_not_read(
    config: LimitConfig, why: str, when: str
) -> None:
    """Issue 49 point 6: 120 long messages at once were refused one by one (a notice each, which the platforms'
    own limits then dropped): now one notice per limit says how many were not read, and when to try again."""
    model, posted = slow_model(), []
    agent = create_agent(
        model=model,
        contexts=[chat],
        outputs=[output(type="say", handler=lambda data, ctx, agent: posted.append(data), context=chat)],
        memory=InMemoryStore(),
        plugins=[Usage(InMemoryUsage()), Limits(Limiter(config))],
        options=AgentOptions(max_batch=50),
    )
    async with agent:
        await burst(agent, 120)
    notices = [text for text in posted if text != "ok"]
    assert len(notices) == 1, notices
    assert notices[0].startswith("I did not read ") and why in notices[0] and when in notices[0], notices[0]
