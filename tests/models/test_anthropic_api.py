"""The Anthropic provider against a fake Messages API on loopback: streaming, retries, errors, secrets."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from core.errors import ModelAuthError, ModelError
from core.models import AnthropicModel, ModelRequest, ModelUsage, RetryPolicy
from tests.fakes.anthropic_server import FakeAnthropicServer, Reply

from .support import Sleeps, collect

KEY = "sk-ant-test-0123456789abcdefSECRET"
REQUEST = ModelRequest(system="You are terse.", prompt="Say hello.", max_tokens=40)


@pytest.fixture
async def server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer(api_key=KEY) as srv:
        yield srv


def make(server: FakeAnthropicServer, policy: RetryPolicy, **kw: object) -> AnthropicModel:
    options: dict[str, object] = {"model": "claude-fake", "api_key": KEY, "base_url": server.url, "retry": policy}
    options.update(kw)
    return AnthropicModel(**options)  # type: ignore[arg-type]


async def test_streams_the_answer_and_reports_usage(server: FakeAnthropicServer, policy: RetryPolicy) -> None:
    server.default = Reply(chunks=("Hel", "lo", "!"), usage=(30, 4))
    model = make(server, policy)
    try:
        chunks = [c async for c in model.stream(REQUEST)]
    finally:
        await model.aclose()
    assert chunks == ["Hel", "lo", "!"]
    assert model.last_usage == ModelUsage(input_tokens=30, output_tokens=4)
    (seen,) = server.requests
    assert KEY in (seen.headers.get("x-api-key"), seen.headers.get("Authorization", "").removeprefix("Bearer "))
    body = seen.body
    assert body["model"] == "claude-fake"
    assert body["system"] == [  # (the stable part, marked for the prompt cache)
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert body["max_tokens"] == 40
    assert body["stop_sequences"] == ["</response>"]
    assert "temperature" not in body
    assert body["stream"] is True


async def test_429_then_success_is_retried_after_retry_after(
    server: FakeAnthropicServer, policy: RetryPolicy, sleeps: Sleeps
) -> None:
    server.replies.extend([Reply(status=429, headers={"retry-after": "2"}), Reply(chunks=("ok",))])
    model = make(server, policy)
    try:
        assert await collect(model, REQUEST) == "ok"
    finally:
        await model.aclose()
    assert len(server.requests) == 2
    assert sleeps.delays == [2.0]


async def test_overloaded_and_500_are_retried(server: FakeAnthropicServer, policy: RetryPolicy, sleeps: Sleeps) -> None:
    server.replies.extend([Reply(status=529), Reply(status=500), Reply(chunks=("fine",))])
    model = make(server, policy)
    try:
        assert await collect(model, REQUEST) == "fine"
    finally:
        await model.aclose()
    assert len(server.requests) == 3
    assert len(sleeps.delays) == 2


async def test_overloaded_event_before_any_text_is_retried(
    server: FakeAnthropicServer, policy: RetryPolicy, sleeps: Sleeps
) -> None:
    server.replies.extend([Reply(chunks=("x",), fail_after=0), Reply(chunks=("after", " retry"))])
    model = make(server, policy)
    try:
        assert await collect(model, REQUEST) == "after retry"
    finally:
        await model.aclose()
    assert len(sleeps.delays) == 1


async def test_overloaded_event_after_text_is_an_error(server: FakeAnthropicServer, policy: RetryPolicy) -> None:
    server.default = Reply(chunks=("one", "two"), fail_after=1)
    model = make(server, policy)
    got: list[str] = []
    try:
        with pytest.raises(ModelError, match="529"):
            async for chunk in model.stream(REQUEST):
                got.append(chunk)
    finally:
        await model.aclose()
    assert got == ["one"]
    assert len(server.requests) == 1


async def test_refused_key_names_llm_api_key_and_hides_the_key(
    server: FakeAnthropicServer, policy: RetryPolicy, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-ant-wrong-9876543210zyxwvuSECRET"
    model = make(server, policy, api_key=wrong)
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(ModelAuthError) as info:
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    assert len(server.requests) == 1
    text = str(info.value)
    assert "LLM_API_KEY" in text and "401" in text
    assert wrong not in text and wrong[:12] not in text
    assert info.value.__cause__ is None
    assert wrong not in caplog.text
    assert wrong not in repr(model)


async def test_timeout_gives_model_error_naming_llm_timeout(server: FakeAnthropicServer, policy: RetryPolicy) -> None:
    server.default = Reply(stall=True)
    model = make(server, policy, timeout=0.3)
    try:
        with pytest.raises(ModelError, match="LLM_TIMEOUT"):
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    assert len(server.requests) == 1


async def test_bad_request_is_not_retried(server: FakeAnthropicServer, policy: RetryPolicy, sleeps: Sleeps) -> None:
    server.default = Reply(status=400, message="max_tokens: too large")
    model = make(server, policy)
    try:
        with pytest.raises(ModelError, match=r"HTTP 400\): max_tokens: too large"):
            await collect(model, REQUEST)
    finally:
        await model.aclose()
    assert sleeps.delays == []


async def test_the_tokens_read_from_the_prompt_cache_are_reported(
    server: FakeAnthropicServer, policy: RetryPolicy
) -> None:
    server.default = Reply(chunks=("ok",), usage=(300, 4), cached=256)
    model = make(server, policy)
    try:
        assert [c async for c in model.stream(REQUEST)] == ["ok"]
    finally:
        await model.aclose()
    assert model.last_usage == ModelUsage(input_tokens=300, output_tokens=4, cached_input_tokens=256)
