"""What is Slack's own, beside the conformance suite: the Events API refuses a request not signed with the app's
secret, a refused bot token stops the start with a message naming it, the model's text pings nobody, and a shared
file is fetched with the bot token from Slack's host only. The real slack-bolt / slack_sdk against the fake Slack."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bots.app import build_agent
from bots.settings import Settings
from core import Agent, ScriptedModel
from core.errors import ConfigError, PlatformError
from core.media import Attachment, AttachmentKind
from extensions.slack import get_runtime
from extensions.slack.runtime import SlackRuntime
from tests.fakes.slack_server import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fleet.server import free_port

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

DEADLINE = 60.0


def say(text: str) -> str:
    return f'<response><output type="slack:message">{text}</output></response>'


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def bots(tmp_path: Path) -> AsyncIterator[list[Agent]]:
    started: list[Agent] = []
    yield started
    for agent in reversed(started):
        await agent.stop()


async def start(fake: FakeSlack, tmp_path: Path, bots: list[Agent], model: ScriptedModel, **slack: Any) -> Agent:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        bot={"data_dir": str(tmp_path / "data")},
        llm={"provider": "scripted"},
        slack={"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "api_url": fake.api_url, **slack},
    )
    agent = build_agent(settings, model=model, platforms=["slack"])
    bots.append(agent)
    await agent.start()
    return agent


async def test_an_events_api_request_not_signed_with_the_secret_is_refused(
    fake: FakeSlack, tmp_path: Path, bots: list[Agent]
) -> None:
    port = free_port()
    fake.request_url = f"http://127.0.0.1:{port}/slack/events"
    events = {"mode": "events", "signing_secret": SIGNING_SECRET, "events_host": "127.0.0.1", "events_port": port}
    model = ScriptedModel([say("Signed, so answered.")], repeat_last=True)
    await start(fake, tmp_path, bots, model, **events)
    fake.signing_secret = "a-forger-s-guess"
    fake.user_says("D1", "forged")
    await fake.wait_for(lambda: 401 in fake.event_statuses, timeout=DEADLINE)
    fake.signing_secret = SIGNING_SECRET  # (the forged one is retried, now signed: as if Slack sent it)
    await fake.wait_for(lambda: fake.visible("D1") == ["Signed, so answered."], timeout=DEADLINE)
    assert fake.event_statuses[0] == 401 and 200 in fake.event_statuses


async def test_a_refused_bot_token_stops_the_start_naming_the_variable(
    fake: FakeSlack, tmp_path: Path, bots: list[Agent]
) -> None:
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN was refused by Slack") as caught:
        await start(fake, tmp_path, bots, ScriptedModel([say("never")]), bot_token="xoxb-wrong")
    assert "xoxb-wrong" not in str(caught.value)


async def test_the_model_s_text_pings_nobody_and_hides_no_link(
    fake: FakeSlack, tmp_path: Path, bots: list[Agent]
) -> None:
    text = "Hey &lt;!channel&gt; and &lt;@U0BOSS&gt;, see &lt;https://evil.example|the docs&gt;"
    await start(fake, tmp_path, bots, ScriptedModel([say(text)], repeat_last=True))
    await fake.wait_for(lambda: fake.sockets > 0, timeout=DEADLINE)
    fake.user_says("D1", "hi")
    await fake.wait_for(lambda: bool(fake.visible("D1")), timeout=DEADLINE)
    await fake.wait_for(lambda: "docs" in fake.visible("D1")[-1], timeout=DEADLINE)
    [shown] = fake.visible("D1")
    assert "<" not in shown and "&lt;!channel&gt;" in shown and "&lt;@U0BOSS&gt;" in shown


async def test_a_shared_file_is_fetched_from_slack_s_host_only(
    fake: FakeSlack, tmp_path: Path, bots: list[Agent]
) -> None:
    agent = await start(fake, tmp_path, bots, ScriptedModel([say("ok")]))
    runtime = get_runtime(agent)
    assert isinstance(runtime, SlackRuntime)
    fake.user_files["F1"] = b"the bytes"
    here = Attachment(kind=AttachmentKind.FILE, source="slack", ref=f"http://127.0.0.1:{fake.port}/files/F1")
    assert await runtime.fetch_file(here) == b"the bytes"
    elsewhere = Attachment(kind=AttachmentKind.FILE, source="slack", ref="https://files.evil.example/F1")
    with pytest.raises(PlatformError, match="not on Slack's host"):
        await runtime.fetch_file(elsewhere)
    assert fake.downloads == ["F1"]


async def test_a_thread_the_bot_answered_in_is_followed_by_a_process_that_did_not_answer_there(
    fake: FakeSlack, tmp_path: Path, bots: list[Agent]
) -> None:
    """In a fleet another gateway may receive the thread's next message, or the process was restarted: the bot's
    own reply in the thread (``conversations.replies``) says it takes part, without a mention."""
    first = await start(fake, tmp_path, bots, ScriptedModel([say("Sure.")], repeat_last=True))
    await fake.wait_for(lambda: fake.sockets > 0, timeout=DEADLINE)
    root = fake.user_says("C1", "<@UBOT> can you help?", channel_type="channel")
    await fake.wait_for(lambda: fake.visible("C1") == ["Sure."], timeout=DEADLINE)
    await first.stop()
    bots.remove(first)
    await start(fake, tmp_path / "again", bots, ScriptedModel([say("Of course.")], repeat_last=True))
    await fake.wait_for(lambda: fake.sockets > 0, timeout=DEADLINE)
    fake.user_says("C1", "and one more thing", channel_type="channel", thread_ts=root.ts)
    fake.user_says("C1", "a new topic, not for the bot", channel_type="channel")
    await fake.wait_for(lambda: fake.visible("C1") == ["Sure.", "Of course."], timeout=DEADLINE)
    assert [m.thread_ts for m in fake.bot_messages("C1")] == [root.ts, root.ts]
    assert len(fake.calls_of("conversations.replies")) == 1  # (a root message is no thread: nothing to ask)
