"""A bot on a chain of models (LLM_FALLBACKS) against two fake OpenAI-compatible servers: the step the first model
fails is answered by the second, and usage, /metrics and /readyz say which model answered, failed and was skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bots.ops import Ops, model_check, serve
from core import Price
from core.events import RunEvent, RunEventType
from core.health import Degraded
from core.models import BreakerPolicy, FallbackModel, OpenAICompatModel, RetryPolicy
from core.usage import USAGE, day_of
from extensions.terminal import cli_session
from tests.fakes.openai_server import FakeOpenAIServer, Reply

from .support import make_agent, sample
from .test_endpoints import get, get_json

ANSWER = ('<response><output type="cli:message">', "Hi there", "</output></response>")


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_usage_metrics_and_readiness_say_which_model_answered(http: aiohttp.ClientSession) -> None:
    first = FakeOpenAIServer(
        replies=[Reply(chunks=ANSWER, usage=(100, 7)), Reply(status=429)], default=Reply(status=500)
    )
    second = FakeOpenAIServer(default=Reply(chunks=ANSWER, usage=(30, 3)))
    async with first, second:
        clock = Clock()
        chain = FallbackModel(
            [first.model("first"), second.model("second")],
            breaker=BreakerPolicy(failures=1, pause=30),
            timeout=5,
            clock=clock,
        )
        ops = Ops()
        agent = make_agent(
            chain, prices={"first": Price(input=1.0, output=2.0), "second": Price(input=3.0, output=4.0)}
        )
        ops.attach(agent)
        before = {
            (name, tuple(sorted(labels.items()))): sample(name, labels)
            for name, labels in (
                ("bots_usage_tokens_total", {"model": "first", "direction": "input"}),
                ("bots_usage_tokens_total", {"model": "second", "direction": "input"}),
                ("bots_model_failed_total", {"model": "first"}),
                ("bots_model_skipped_total", {"model": "first"}),
                ("bots_model_seconds_count", {"model": "openai:first"}),
                ("bots_model_seconds_count", {"model": "openai:second"}),
                ("bots_messages_failed_total", {"platform": "cli"}),
            )
        }

        def grew(name: str, **labels: str) -> float:
            return sample(name, labels) - before[(name, tuple(sorted(labels.items())))]

        async with agent, serve(ops, host="127.0.0.1", port=0) as port:
            replies = []
            for text in ("one", "two", "three"):  # first answers; first is rate limited; first is paused
                replies.append(await agent.send(cli_session, "ops", {"type": "cli:message", "data": text}))
            status, body = await get_json(http, port, "/readyz")
            _, _, metrics = await get(http, port, "/metrics")
        await chain.aclose()
    assert len(first.requests) == 2 and len(second.requests) == 2  # the paused model was not asked the third time
    assert status == 200 and body["checks"]["model"].startswith("degraded: openai:first paused for 30s")
    today = [day_of()]
    assert (await agent.provided(USAGE).totals("model:first", today)).input_tokens == 100
    assert (await agent.provided(USAGE).totals("model:second", today)).input_tokens == 60
    chat = await agent.provided(USAGE).totals("chat:cli:session:ops", today)
    assert (chat.input_tokens, chat.output_tokens) == (160, 13)
    assert chat.cost_micros == 100 * 1 + 7 * 2 + 60 * 3 + 6 * 4  # each call at its own model's price
    assert grew("bots_usage_tokens_total", model="first", direction="input") == 100
    assert grew("bots_usage_tokens_total", model="second", direction="input") == 60
    assert grew("bots_model_failed_total", model="first") == 1
    assert grew("bots_model_skipped_total", model="first") == 1
    assert grew("bots_model_seconds_count", model="openai:first") == 1
    assert grew("bots_model_seconds_count", model="openai:second") == 2
    assert grew("bots_messages_failed_total", platform="cli") == 0
    families = {f.name for f in text_string_to_metric_families(metrics)}
    assert {"bots_model_failed", "bots_model_skipped"} <= families
    assert all(reply for reply in replies)


async def test_readiness_fails_only_when_no_model_of_the_chain_can_answer() -> None:
    second = FakeOpenAIServer()
    async with second:
        down = OpenAICompatModel(model="down", base_url="http://127.0.0.1:9/v1", retry=RetryPolicy(retries=0))
        chain = FallbackModel([down, second.model("second")])
        outcome = await model_check(chain, cache_seconds=2)()
        assert isinstance(outcome, Degraded) and outcome.startswith("openai:down: cannot reach the model server")
        lone = FallbackModel([down, OpenAICompatModel(model="d2", base_url="http://127.0.0.1:9/v1")])
        outcome = await model_check(lone, cache_seconds=2)()
        assert not isinstance(outcome, Degraded) and isinstance(outcome, str)
        assert outcome.startswith("no model of the LLM_FALLBACKS chain can answer")
        for model in (chain, lone):
            await model.aclose()


async def test_an_answer_broken_off_half_way_is_shown_once_and_fails_the_run() -> None:
    first = FakeOpenAIServer(default=Reply(chunks=(*ANSWER[:2], " and more", ANSWER[2]), fail_after=2))
    second = FakeOpenAIServer(default=Reply(chunks=ANSWER))
    async with first, second:
        chain = FallbackModel([first.model("first"), second.model("second")], timeout=5)
        agent = make_agent(chain)
        events: list[RunEvent] = []
        agent.add_event_listener(events.append)
        async with agent:
            await agent.send(cli_session, "half", {"type": "cli:message", "data": "hello"})
        await chain.aclose()
    assert second.requests == []  # not asked again: its answer would repeat what was shown
    written = "".join(e.content for e in events if e.type is RunEventType.OUTPUT_TEXT and not e.final)
    assert written == "Hi there"  # once
    [error] = [e for e in events if e.type is RunEventType.ERROR]
    assert "reported an error while answering" in error.content
