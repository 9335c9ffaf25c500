"""One message through the fake Telegram with the bot as ``bots run`` builds it, in this process, traced with
the SDK's in-memory exporter: one trace from the update to the post, the model call by the GenAI conventions,
and no message text in any span unless content capture is on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.app import build_agent
from bots.settings import Settings
from core import Agent
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import INPUT_TOKENS, OUTPUT_TOKENS, CountingModel, StartTracing, Traced, attribute_texts

SECRET = "my secret plan 4242"
REPLY = "the reply nobody else reads"


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer() as fake:
        yield fake


async def _one_message(telegram: FakeTelegramServer, tmp_path: Path) -> Agent:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        bot={"data_dir": str(tmp_path / "data"), "platforms": "telegram"},
        llm={"provider": "scripted"},
        telegram={"token": telegram.token, "api_url": telegram.api_url, "poll_timeout": 10},
    )
    agent = build_agent(settings, model=CountingModel(REPLY))
    await agent.start()
    try:
        telegram.user_says(SECRET, user_id=777)
        [reply] = await telegram.wait_replies(1)
        assert reply.text == REPLY
    finally:
        await agent.stop()
    return agent


async def test_one_message_is_one_trace_from_the_update_to_the_post(
    telegram: FakeTelegramServer, tmp_path: Path, traced: Traced
) -> None:
    await _one_message(telegram, tmp_path)
    spans = traced.spans()
    names = {s.name for s in spans}
    for name in ("telegram update", "read memory", "invoke_agent telegram:chat", "step", "telegram sendMessage"):
        assert name in names, (name, sorted(names))
    [update] = traced.named("telegram update")
    trace_id = update.context.trace_id
    [model] = [s for s in spans if s.name.startswith("chat ")]
    assert {s.context.trace_id for s in spans if s.name != "telegram getMe"} >= {trace_id}
    for span in (model, *traced.named("telegram sendMessage"), *traced.named("step")):
        assert span.context.trace_id == trace_id, span.name
    attrs = dict(model.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.system"] == "fake"
    assert attrs["gen_ai.request.model"] == "counting-1"
    assert attrs["gen_ai.response.model"] == "counting-1"
    assert attrs["gen_ai.usage.input_tokens"] == INPUT_TOKENS
    assert attrs["gen_ai.usage.output_tokens"] == OUTPUT_TOKENS
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert float(attrs["gen_ai.response.time_to_first_token"]) >= 0  # type: ignore[arg-type]
    [step] = [s for s in traced.named("step") if s.context.span_id == model.parent.span_id]  # type: ignore[union-attr]
    [run] = traced.named("invoke_agent telegram:chat")
    assert step.parent is not None and step.parent.span_id == run.context.span_id
    [post] = traced.named("telegram sendMessage")
    assert dict(post.attributes or {})["http.response.status_code"] == 200
    assert dict(post.attributes or {})["bots.platform.retries"] == 0


async def test_without_capture_no_span_holds_the_text_and_ids_are_hashed(
    telegram: FakeTelegramServer, tmp_path: Path, traced: Traced
) -> None:
    await _one_message(telegram, tmp_path)
    texts = attribute_texts(traced.spans())
    assert texts
    assert not [t for t in texts if "secret plan" in t or "nobody else" in t]
    [update] = traced.named("telegram update")
    user = dict(update.attributes or {})["user.id"]
    assert user != "777" and len(str(user)) == 16
    assert "777" not in texts and telegram.token not in " ".join(texts)


async def test_with_capture_the_model_span_holds_prompt_and_answer(
    telegram: FakeTelegramServer, tmp_path: Path, start_traced: StartTracing
) -> None:
    traced = start_traced(capture_content=True, hash_ids=False)
    await _one_message(telegram, tmp_path)
    [model] = [s for s in traced.spans() if s.name.startswith("chat ")]
    attrs = dict(model.attributes or {})
    assert SECRET in str(attrs["gen_ai.input.messages"])
    assert REPLY in str(attrs["gen_ai.output.messages"])
    [update] = traced.named("telegram update")
    assert dict(update.attributes or {})["user.id"] == "777"


async def test_the_capture_variable_of_the_genai_conventions_turns_capture_on(
    telegram: FakeTelegramServer, tmp_path: Path, start_traced: StartTracing, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    traced = start_traced()
    await _one_message(telegram, tmp_path)
    assert [t for t in attribute_texts(traced.spans()) if SECRET in t]


async def test_a_post_answered_429_shows_the_status_and_the_retry(
    telegram: FakeTelegramServer, tmp_path: Path, traced: Traced
) -> None:
    telegram.fail("sendMessage", status=429, retry_after=1)
    await _one_message(telegram, tmp_path)
    [post] = traced.named("telegram sendMessage")
    attrs = dict(post.attributes or {})
    assert attrs["bots.platform.rate_limited"] is True
    assert attrs["bots.platform.retries"] == 1
    assert attrs["http.response.status_code"] == 200
    codes = [dict(e.attributes or {})["http.response.status_code"] for e in post.events]
    assert codes == [429, 200]
