"""A chain of models (``FallbackModel``) against two fake OpenAI-compatible servers on 127.0.0.1: the first fails
(429, 500, silence, a refused connection), the second answers the same request; a stream broken off half-way is
not answered again; a model that keeps failing is skipped until its pause ends (a stepped clock, no sleeping)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from core.errors import ModelAuthError, ModelError
from core.models import (
    BreakerPolicy,
    BreakerState,
    CircuitBreaker,
    FallbackModel,
    ImagePart,
    ModelRequest,
    ModelRoute,
    OpenAICompatModel,
    RetryPolicy,
    ScriptedModel,
)
from core.models.base import call_route, call_usage
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.ports import free_port as closed_port

REQUEST = ModelRequest(system="be brief", prompt="hello")
SECOND = Reply(chunks=("from", " the second"), usage=(40, 4))


class Clock:
    """A monotonic clock the test steps by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeOpenAIServer, FakeOpenAIServer]]:
    first, second = FakeOpenAIServer(), FakeOpenAIServer(default=SECOND)
    async with first, second:
        yield first, second


def state(breaker: CircuitBreaker) -> BreakerState:
    """The breaker's state now (a function: mypy would take a property read twice for one value)."""
    return breaker.state


async def answer(chain: FallbackModel, request: ModelRequest = REQUEST) -> tuple[str, ModelRoute]:
    text = "".join([chunk async for chunk in chain.stream(request)])
    route = call_route.get()
    assert route is not None
    return text, route


def chain_of(
    *models: OpenAICompatModel | ScriptedModel,
    clock: Clock | None = None,
    failures: int = 3,
    pause: float = 30.0,
    timeout: float = 10.0,
) -> FallbackModel:
    """``timeout``: the wait for a model's first chunk. Long, so that a busy machine's slow first connection is not
    taken for a silent model (the 429 case timed out at 0.5 s at a load of 9); short only where a test waits for it."""
    policy = BreakerPolicy(failures=failures, window=60.0, pause=pause)
    return FallbackModel(models, breaker=policy, timeout=timeout, clock=clock or Clock())


@pytest.mark.parametrize(
    "failure",
    [Reply(status=429, headers={"retry-after": "30"}), Reply(status=500), Reply(status=503), Reply(stall=True)],
    ids=["429", "500", "503", "silent"],
)
async def test_the_next_model_answers_when_the_first_fails_before_its_first_chunk(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer], failure: Reply
) -> None:
    first, second = servers
    first.replies.append(failure)
    timeout = 0.5 if failure.stall else 10.0
    chain = chain_of(first.model("first"), second.model("second"), timeout=timeout)
    try:
        text, route = await answer(chain)
    finally:
        await chain.aclose()
    assert text == "from the second"
    assert route.answered == "second" and route.provider == "openai"
    assert [name for name, _ in route.failed] == ["first"] and route.skipped == []
    assert len(first.requests) == 1 and len(second.requests) == 1
    assert second.requests[0].body["messages"] == first.requests[0].body["messages"]  # the same step, asked again
    usage = call_usage.get()
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (40, 4)  # the answering model's


async def test_a_refused_connection_is_handed_to_the_next_model(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer],
) -> None:
    _, second = servers
    down = OpenAICompatModel(
        model="down", base_url=f"http://127.0.0.1:{closed_port()}/v1", retry=RetryPolicy(retries=0)
    )
    chain = chain_of(down, second.model("second"))
    try:
        text, route = await answer(chain)
    finally:
        await chain.aclose()
    assert text == "from the second" and route.answered == "second"
    assert route.failed[0][0] == "down" and "cannot reach" in route.failed[0][1]


@pytest.mark.parametrize("cut", ["error_event", "dropped_connection"])
async def test_a_stream_broken_off_half_way_is_not_answered_again(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer], cut: str
) -> None:
    first, second = servers
    chunks = ("Hel", "lo", " world")
    first.replies.append(
        Reply(chunks=chunks, fail_after=1) if cut == "error_event" else Reply(chunks=chunks, drop_after=1)
    )
    chain = chain_of(first.model("first"), second.model("second"), failures=2)
    shown: list[str] = []
    try:
        with pytest.raises(ModelError) as raised:
            async for chunk in chain.stream(REQUEST):
                shown.append(chunk)
    finally:
        await chain.aclose()
    assert shown == ["Hel"]  # what was shown stays shown once: no second model writes it again
    assert second.requests == []
    assert raised.value.transient
    route = call_route.get()
    assert route is not None and route.answered == "first" and [n for n, _ in route.failed] == ["first"]
    chain.breakers[0].failed()  # the broken stream counted: one more failure pauses the model
    assert state(chain.breakers[0]) is BreakerState.OPEN


async def test_a_refused_key_or_a_bad_request_is_not_handed_on(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer],
) -> None:
    first, second = servers
    first.replies.extend([Reply(status=401), Reply(status=400, message="bad request")])
    chain = chain_of(first.model("first"), second.model("second"))
    try:
        with pytest.raises(ModelAuthError):
            await answer(chain)
        with pytest.raises(ModelError, match="HTTP 400"):
            await answer(chain)
    finally:
        await chain.aclose()
    assert second.requests == []  # a mistake of the configuration, not a model that is down
    assert state(chain.breakers[0]) is BreakerState.CLOSED


async def test_a_model_that_keeps_failing_is_skipped_until_its_pause_ends(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer],
) -> None:
    first, second = servers
    first.default = Reply(status=500)
    clock = Clock()
    chain = chain_of(first.model("first"), second.model("second"), clock=clock, failures=2, pause=30)
    try:
        for _ in range(2):  # two failures within the window: paused
            text, route = await answer(chain)
            assert text == "from the second" and [n for n, _ in route.failed] == ["first"]
            clock.now += 5
        assert state(chain.breakers[0]) is BreakerState.OPEN and len(first.requests) == 2
        clock.now += 20  # 25 s into the pause: skipped, nobody waits for it
        text, route = await answer(chain)
        assert text == "from the second" and route.skipped == ["first"] and route.failed == []
        assert len(first.requests) == 2
        clock.now += 6  # the pause has ended: one trial, which fails and pauses it again
        text, route = await answer(chain)
        assert [n for n, _ in route.failed] == ["first"] and len(first.requests) == 3
        assert state(chain.breakers[0]) is BreakerState.OPEN
        text, route = await answer(chain)
        assert route.skipped == ["first"] and len(first.requests) == 3
        first.default = Reply(chunks=("first", " again"))  # it is back
        clock.now += 31
        text, route = await answer(chain)
        assert text == "first again" and route.answered == "first" and route.failed == [] and route.skipped == []
        assert state(chain.breakers[0]) is BreakerState.CLOSED
    finally:
        await chain.aclose()


async def test_when_every_model_is_paused_the_call_fails_at_once(
    servers: tuple[FakeOpenAIServer, FakeOpenAIServer],
) -> None:
    first, second = servers
    first.default = second.default = Reply(status=503)
    clock = Clock()
    chain = chain_of(first.model("first"), second.model("second"), clock=clock, failures=1, pause=30)
    try:
        with pytest.raises(ModelError, match=r"no model of the chain answered: first: .*503.*; second: .*503"):
            await answer(chain)
        clock.now += 10
        with pytest.raises(ModelError, match=r"every model of the chain is paused .* tried again in 20s"):
            await answer(chain)
    finally:
        await chain.aclose()
    assert len(first.requests) == len(second.requests) == 1


async def test_later_models_are_asked_for_their_own_model_and_without_images_they_cannot_see() -> None:
    down = ScriptedModel([ModelError("HTTP 503", transient=True)], vision=True)
    down.name, down.model = "openai:big", "big"
    local = ScriptedModel(["<response/>"])
    local.name = "local:small"
    chain = FallbackModel([down, local])
    image = ImagePart(marker="[photo]", mime="image/png", data=b"png")
    request = ModelRequest(system="s", prompt="look [photo] here", model="big-chosen-with-/model", images=(image,))
    text, route = await answer(chain, request)
    assert text == "<response/>" and route.answered == "local:small" and route.provider == "local"
    assert down.requests[0] is request
    asked = local.requests[0]
    assert asked.model is None and asked.images == ()
    assert "[photo]\n(the image could not be shown" in asked.prompt
    assert chain.name == "openai:big" and chain.model == "big" and chain.vision  # the first model's


async def test_the_first_model_answering_counts_under_the_conversations_model() -> None:
    chain = FallbackModel([ScriptedModel(["hi"]), ScriptedModel(["other"])])
    chain.models[0].model = "configured"  # type: ignore[misc]
    _, route = await answer(chain, ModelRequest(system="s", prompt="p", model="chosen"))
    assert route.answered == "chosen"


async def test_a_cancelled_trial_gives_its_slot_back() -> None:
    clock = Clock()
    breaker = CircuitBreaker(BreakerPolicy(failures=1, pause=10), clock=clock)
    assert breaker.failed() and state(breaker) is BreakerState.OPEN and not breaker.allows()
    clock.now += 10
    assert state(breaker) is BreakerState.HALF_OPEN
    assert breaker.allows() and not breaker.allows()  # one trial at a time
    breaker.released()
    assert breaker.allows()
    breaker.succeeded()
    assert state(breaker) is BreakerState.CLOSED and breaker.reopens_in() == 0


def test_failures_outside_the_window_do_not_add_up() -> None:
    clock = Clock()
    breaker = CircuitBreaker(BreakerPolicy(failures=3, window=60), clock=clock)
    for _ in range(5):
        assert not breaker.failed()
        clock.now += 31  # never three within 60 s
    assert state(breaker) is BreakerState.CLOSED
    never = CircuitBreaker(BreakerPolicy(failures=0), clock=clock)
    assert not any(never.failed() for _ in range(10)) and never.allows()


async def test_a_reader_that_stops_early_leaves_the_model_healthy() -> None:
    clock = Clock()
    chain = FallbackModel(
        [ScriptedModel(["a long answer"], chunk_size=2)], breaker=BreakerPolicy(failures=1), clock=clock
    )
    stream = chain.stream(REQUEST)
    assert await anext(stream) == "a "
    await stream.aclose()  # a turn guard cut the answer off: the model did answer
    assert state(chain.breakers[0]) is BreakerState.CLOSED and chain.breakers[0].allows()
