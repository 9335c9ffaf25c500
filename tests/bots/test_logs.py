"""Logs: JSON lines with the correlation id from the incoming message to the reply (also across a queue),
secrets masked everywhere, message text only with LOG_CONTENT=true."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging
from typing import Any

import pytest

from bots.logs import MASK, configure_logging, secrets_of
from bots.settings import LogSettings, Settings
from core import Agent, InputRef, ScriptedModel, context, create_agent, extension, input, output
from core.trace import correlation_id
from tests.agent_args import agent_args

REPLY = '<response><output type="t:reply">Hello</output></response>'
log = logging.getLogger("tests.adapter")


def capture(**settings: Any) -> tuple[io.StringIO, list[str]]:
    secrets: list[str] = settings.pop("secrets", [])
    stream = io.StringIO()
    configure_logging(LogSettings(**settings), secrets=secrets, stream=stream)
    return stream, secrets


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def chat_agent(**options: Any) -> Agent:
    """A tiny platform: the output handler is where an adapter would post the reply."""

    async def post(content: Any, ctx: Any, agent: Agent) -> None:
        log.info("posted reply of %d chars", len(str(content)))

    chat = context(type="t:chat", schema=str, key=lambda key: key)
    reply = output(type="t:reply", handler=post, context=chat)
    message = input(type="t:message", schema=str, context=chat)
    ext = extension(name="t", contexts=[chat], outputs=[reply], inputs=[message])
    return create_agent(**agent_args(model=ScriptedModel([REPLY], repeat_last=True), extensions=[ext], **options))


@pytest.mark.usefixtures("restore_logging")
async def test_the_correlation_id_goes_from_the_incoming_message_to_the_reply() -> None:
    stream, _ = capture(format="json")
    agent = chat_agent()
    chat = agent.contexts["t:chat"]
    async with agent:
        token = correlation_id.set("tg:42:1001")  # what an adapter does when a message arrives
        try:
            log.info("message received")
            await agent.send(chat, "42", {"type": "t:message", "data": "hi"})
        finally:
            correlation_id.reset(token)
        log.info("between messages")
    entries = lines(stream)
    posted = [e for e in entries if e["message"].startswith("posted reply")]
    assert posted and posted[0]["correlation_id"] == "tg:42:1001"
    assert next(e for e in entries if e["message"] == "message received")["correlation_id"] == "tg:42:1001"
    assert "correlation_id" not in next(e for e in entries if e["message"] == "between messages")


@pytest.mark.usefixtures("restore_logging")
async def test_an_input_without_an_id_gets_one_and_keeps_it_in_the_run() -> None:
    stream, _ = capture(format="json")
    agent = chat_agent()
    async with agent:
        chain = await agent.send(agent.contexts["t:chat"], "7", {"type": "t:message", "data": "hi"})
    ref = next(e for e in chain if isinstance(e, InputRef))
    assert ref.correlation_id == ref.id
    posted = next(e for e in lines(stream) if e["message"].startswith("posted reply"))
    assert posted["correlation_id"] == ref.id


@pytest.mark.usefixtures("restore_logging")
async def test_the_correlation_id_crosses_a_queue_with_the_input() -> None:
    """A gateway stamps the input, the queue stores it as JSON, a worker runs it in a fresh context."""
    stream, _ = capture(format="json")
    gateway = chat_agent()
    token = correlation_id.set("discord:555")
    try:
        stored = gateway.make_input({"type": "t:message", "data": "hi"}).model_dump_json()
    finally:
        correlation_id.reset(token)
    worker = chat_agent()
    chat = worker.contexts["t:chat"]

    async def drain() -> None:  # a worker's job: no correlation id of its own
        assert correlation_id.get() is None
        await worker.run(chat, "9", [InputRef.model_validate_json(stored)])

    async with worker:
        await asyncio.create_task(drain(), context=contextvars.Context())
    posted = next(e for e in lines(stream) if e["message"].startswith("posted reply"))
    assert posted["correlation_id"] == "discord:555"


@pytest.mark.usefixtures("restore_logging")
def test_text_logs_show_the_correlation_id_and_json_logs_keep_extra_fields() -> None:
    stream, _ = capture(format="text")
    token = correlation_id.set("abc")
    try:
        log.info("hello")
    finally:
        correlation_id.reset(token)
    assert stream.getvalue().rstrip().endswith("tests.adapter: hello [cid=abc]")
    stream, _ = capture(format="json")
    log.info("sent", extra={"chat_id": 42, "chars": 17})
    entry = lines(stream)[0]
    assert entry["chat_id"] == 42 and entry["chars"] == 17


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.usefixtures("restore_logging")
def test_secrets_never_reach_the_log_not_even_in_tracebacks(monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    token = "7345:AAE-very-secret-telegram-token"
    key = "sk-live-0123456789abcdef"
    monkeypatch.setenv("TELEGRAM_TOKEN", token)
    monkeypatch.setenv("LLM_API_KEY", key)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    found = secrets_of(settings)
    assert token in found and key in found
    stream, _ = capture(format=fmt, secrets=found)
    logging.getLogger("httpx").warning("POST https://api.telegram.org/bot%s/getUpdates failed", token)
    try:
        raise RuntimeError(f"auth failed for key {key}")
    except RuntimeError:
        logging.getLogger("tests").exception("model call failed")
    out = stream.getvalue()
    assert token not in out and key not in out
    assert out.count(MASK) >= 2
    assert "auth failed for key" in out


def test_passwords_in_urls_count_as_secrets() -> None:
    class Group(LogSettings):
        url: str = "redis://:hunter2-redis@redis:6379/0"

    assert "hunter2-redis" in secrets_of(Group())


@pytest.mark.parametrize("content", [False, True])
@pytest.mark.usefixtures("restore_logging")
def test_message_text_is_logged_only_when_log_content_is_on(content: bool) -> None:
    stream, _ = capture(format="json", content=content)
    logging.getLogger("content.telegram").info("chat 42 said: %s", "my private message")
    logging.getLogger("telegram.ids").info("chat 42: message 7 (18 chars)")
    out = stream.getvalue()
    assert ("my private message" in out) is content
    assert "message 7 (18 chars)" in out


@pytest.mark.usefixtures("restore_logging")
def test_a_text_line_cannot_be_forged_with_line_breaks_in_what_is_logged() -> None:
    stream, _ = capture(format="text", content=True)
    forged = "hi\n2026-01-05 08:00:00,000 ERROR bots.console: forged\rx\u2028y\x1b[31m"
    logging.getLogger("content.telegram").info("chat 42 said: %s", forged)
    try:
        try:
            raise KeyError(forged)
        except KeyError as exc:
            raise RuntimeError(f"boom on {forged}\x07\x9b") from exc  # an error quoting what a user wrote
    except RuntimeError:
        logging.getLogger("tests").exception("failed on %s", forged)
    first, second, *traceback = stream.getvalue().splitlines()
    assert first.endswith("chat 42 said: hi\\n2026-01-05 08:00:00,000 ERROR bots.console: forged\\rx\\u2028y\\x1b[31m")
    assert second.endswith("failed on hi\\n2026-01-05 08:00:00,000 ERROR bots.console: forged\\rx\\u2028y\\x1b[31m")
    assert traceback[0] == "Traceback (most recent call last):"
    assert traceback[-1] == (
        "RuntimeError: boom on hi\\n2026-01-05 08:00:00,000 ERROR bots.console: forged\\rx\\u2028y\\x1b[31m\\x07\\x9b"
    )
    assert not any(line.startswith("2026-01-05") for line in traceback)  # neither exception of the chain forges one
    assert any("The above exception was the direct cause" in line for line in traceback)
