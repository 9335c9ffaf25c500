"""The OpenAI-compatible provider against a fake server on loopback: streaming, retries, errors, secrets."""

from __future__ import annotations

import gc
import inspect
import logging
from collections.abc import AsyncIterator

import pytest

from core import AgentOptions, InMemoryStore, context, create_agent, output
from core.errors import ModelAuthError, ModelError
from core.models import ModelRequest, ModelUsage, OpenAICompatModel, RetryPolicy
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.ports import free_port

from .support import Sleeps, collect

KEY = "sk-test-0123456789abcdefSECRET"
REQUEST = ModelRequest(system="You are terse.", prompt="Say hello.", max_tokens=32)


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(api_key=KEY) as srv:
        yield srv


def make(server: FakeOpenAIServer, policy: RetryPolicy, **kw: object) -> OpenAICompatModel:
    options: dict[str, object] = {"model": "fake-model", "api_key": KEY, "base_url": server.url, "retry": policy}
    options.update(kw)
    return OpenAICompatModel(**options)  # type: ignore[arg-type]


async def test_streams_the_answer_and_reports_usage(server: FakeOpenAIServer, policy: RetryPolicy) -> None:
    server.default = Reply(chunks=("Hel", "lo", " world"), usage=(21, 3))
    model = make(server, policy, temperature=0.2)
    try:
        chunks = [c async for c in model.stream(REQUEST)]
    finally:
        await model.aclose()
    assert chunks == ["Hel", "lo", " world"]
    assert model.last_usage == ModelUsage(input_tokens=21, output_tokens=3)
    (seen,) = server.requests
    assert seen.headers["Authorization"] == f"Bearer {KEY}"
    body = seen.body
    assert body["model"] == "fake-model"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."},
    ]
    assert body["max_tokens"] == 32
    assert body["stop"] == ["</response>"]
    assert body["temperature"] == 0.2
    assert body["stream"] is True


async def test_a_stream_closed_after_its_first_chunk_leaves_no_generator_suspended(
    server: FakeOpenAIServer, policy: RetryPolicy
) -> None:
    """Closing the stream (a cancelled run does) closes the retry loop and the attempt under it at once: none is
    left for the garbage collector to close in a task of its own, or for the loop's shutdown to find running."""
    server.default = Reply(chunks=("Hel", "lo", " world"))
    model = make(server, policy)
    try:
        stream = model.stream(REQUEST)
        assert await anext(stream) == "Hel"
        await stream.aclose()  # type: ignore[attr-defined]
        suspended = [
            g.ag_code.co_name
            for g in gc.get_objects()
            if inspect.isasyncgen(g) and g.ag_frame is not None and "core/models/" in g.ag_code.co_filename
        ]
        assert suspended == []
    finally:
        await model.aclose()


async def test_429_then_success_is_retried_after_retry_after(
    server: FakeOpenAIServer, policy: RetryPolicy, sleeps: Sleeps
) -> None:
    server.replies.extend([Reply(status=429, headers={"Retry-After": "7"}), Reply(chunks=("ok",))])
    model = make(server, policy)
    try:
        assert await collect(model, REQUEST) == "ok"
    finally:
        await model.aclose()
    assert len(server.requests) == 2
    assert sleeps.delays == [7.0]


async def test_5xx_is_retried_with_growing_jittered_backoff(
    server: FakeOpenAIServer, policy: RetryPolicy, sleeps: Sleeps
) -> None:
    server.replies.extend([Reply(status=500), Reply(status=503), Reply(status=502), Reply(chunks=("fine",))])
    model = make(server, policy)
    try:
        assert await collect(model, REQUEST) == "fine"
    finally:
        await model.aclose()
    assert len(server.requests) == 4
    windows = [0.5, 1.0, 2.0]
    assert len(sleeps.delays) == 3
    assert all(0.0 <= d <= w for d, w in zip(sleeps.delays, windows, strict=True))


async def test_retries_run_out_with_a_clear_error(server: FakeOpenAIServer, sleeps: Sleeps) -> None:
    server.default = Reply(status=500, message="upstream exploded")
    model = make(server, RetryPolicy(retries=2, base_delay=0.01, sleep=sleeps))
    try:
        with pytest.raises(ModelError) as info:
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    assert len(server.requests) == 3
    text = str(info.value)
    assert "HTTP 500" in text and "upstream exploded" in text and "LLM_RETRIES" in text


async def test_refused_key_names_llm_api_key_and_hides_the_key(
    server: FakeOpenAIServer, policy: RetryPolicy, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-9876543210zyxwvuSECRET"
    model = make(server, policy, api_key=wrong)
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(ModelAuthError) as info:
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    assert len(server.requests) == 1  # never retried
    text = str(info.value)
    assert "LLM_API_KEY" in text and "401" in text
    assert wrong not in text and wrong[:12] not in text
    assert info.value.__cause__ is None  # the SDK's exception repeats the server's text, which echoes the key
    assert wrong not in caplog.text
    assert wrong not in repr(model)


async def test_timeout_gives_model_error_naming_llm_timeout(server: FakeOpenAIServer, policy: RetryPolicy) -> None:
    server.default = Reply(stall=True)
    model = make(server, policy, timeout=0.3)
    try:
        with pytest.raises(ModelError) as info:
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    assert "LLM_TIMEOUT" in str(info.value)
    assert len(server.requests) == 1


async def test_unreachable_server_is_retried_then_named(policy: RetryPolicy, sleeps: Sleeps) -> None:
    port = free_port()  # nobody listens there
    model = OpenAICompatModel(model="m", base_url=f"http://user:pw@127.0.0.1:{port}/v1", retry=policy)
    try:
        with pytest.raises(ModelError) as info:
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    text = str(info.value)
    assert "cannot reach" in text and "LLM_BASE_URL" in text
    assert "pw" not in text  # credentials in the URL are not repeated
    assert len(sleeps.delays) == 3


async def test_error_in_the_middle_of_the_stream_is_not_retried(server: FakeOpenAIServer, policy: RetryPolicy) -> None:
    server.default = Reply(chunks=("one", "two", "three"), fail_after=2)
    model = make(server, policy)
    got: list[str] = []
    try:
        with pytest.raises(ModelError) as info:
            async for chunk in model.stream(REQUEST):
                got.append(chunk)
    finally:
        await model.aclose()
    assert got == ["one", "two"]
    assert "the model crashed" in str(info.value)
    assert len(server.requests) == 1


async def test_unknown_model_is_not_retried(server: FakeOpenAIServer, policy: RetryPolicy) -> None:
    server.default = Reply(status=404, message="model not found")
    model = make(server, policy)
    try:
        with pytest.raises(ModelError, match="LLM_MODEL"):
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    assert len(server.requests) == 1


async def test_a_long_retry_after_fails_at_once(server: FakeOpenAIServer, policy: RetryPolicy, sleeps: Sleeps) -> None:
    server.default = Reply(status=429, headers={"retry-after": "3600"})
    model = make(server, policy)
    try:
        with pytest.raises(ModelError, match="3600s"):
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    assert sleeps.delays == []


async def test_a_server_without_keys_needs_none(policy: RetryPolicy) -> None:
    async with FakeOpenAIServer() as server:
        model = OpenAICompatModel(model="llama3.2", base_url=server.url, retry=policy)
        try:
            assert await collect(model, REQUEST) == "Hello there"
        finally:
            await model.aclose()


async def test_drives_the_step_loop(server: FakeOpenAIServer, policy: RetryPolicy) -> None:
    answer = '<response><reasoning>greet</reasoning><output type="chat:message">Hi Ann!</output>'
    server.default = Reply(chunks=tuple(answer[i : i + 7] for i in range(0, len(answer), 7)))
    sent: list[str] = []
    chat = context(type="chat", schema=str, key=lambda s: s)
    say = output(type="chat:message", handler=lambda data, ctx, agent: sent.append(data))
    model = make(server, policy)
    agent = create_agent(model=model, contexts=[chat], outputs=[say], memory=InMemoryStore())
    await agent.start()
    try:
        await agent.send(chat, "ann", {"type": "chat:message", "data": "hello"})
    finally:
        await agent.stop()
        await model.aclose()
    assert sent == ["Hi Ann!"]
    assert '<updates count="1"/>' in server.requests[0].body["messages"][1]["content"]


async def test_a_loopback_server_bypasses_proxy_settings(
    server: FakeOpenAIServer, policy: RetryPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens there
    model = make(server, policy)
    try:
        assert await collect(model, REQUEST) == "Hello there"
    finally:
        await model.aclose()


async def test_a_small_model_served_over_http_gets_chat_turns_and_its_invented_turn_is_cut(
    server: FakeOpenAIServer, policy: RetryPolicy
) -> None:
    server.default = Reply(chunks=("Hello ", "Ann!\nuser: and", " now?\nyou: fine"))
    sent: list[str] = []
    chat = context(type="chat", schema=str, key=lambda s: s, max_steps=1)
    say = output(type="chat:message", handler=lambda data, ctx, agent: sent.append(data))
    model = make(server, policy)
    agent = create_agent(
        model=model, contexts=[chat], outputs=[say], memory=InMemoryStore(), options=AgentOptions(compact_prompt=True)
    )
    await agent.start()
    try:
        await agent.send(chat, "ann", {"type": "chat:message", "data": "hello <|im_start|>"})
    finally:
        await agent.stop()
        await model.aclose()
    assert sent == ["Hello Ann!"]
    body = server.requests[0].body
    assert body["messages"][1:] == [{"role": "user", "content": "hello &lt;|im_start|&gt;"}]
    assert body["stop"] == ["\nuser:", "\nUser:", "\nyou:", "\nassistant:"]


async def test_the_tokens_read_from_the_prompt_cache_are_reported(
    server: FakeOpenAIServer, policy: RetryPolicy
) -> None:
    """OpenAI's automatic prompt caching: ``usage.prompt_tokens_details.cached_tokens``, part of the input tokens."""
    server.default = Reply(chunks=("ok",), usage=(2048, 3), cached=1920)
    model = make(server, policy)
    try:
        assert [c async for c in model.stream(REQUEST)] == ["ok"]
    finally:
        await model.aclose()
    assert model.last_usage == ModelUsage(input_tokens=2048, output_tokens=3, cached_input_tokens=1920)
