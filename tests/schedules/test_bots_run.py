"""``bots run`` (the bot as ``build_agent`` builds it: SQLite under ``BOT_DATA_DIR``) with the real
python-telegram-bot client against the fake Bot API: a reminder set, the bot stopped before its time and started
after it, fires once in the right chat; a text schedule is posted as written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bots.app import build_agent
from bots.settings import Settings
from core import ModelRequest, ScriptedModel
from core.schedules import ScheduleKind, schedules_of
from extensions.telegram import ChatArgs, telegram_chat
from tests.fakes.telegram_server import FakeTelegramServer


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer() as fake:
        yield fake


def remind(request: ModelRequest) -> str:
    said = "call the bank" if "call the bank" in request.prompt else "something else"
    return f'<response><output type="telegram:message">Reminder: {said}</output></response>'


def settings_for(telegram: FakeTelegramServer, data: Path) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        bot={"data_dir": str(data), "platforms": "telegram", "schedules_poll": 0.2, "schedules_grace": 600},
        llm={"provider": "scripted"},
        telegram={"token": telegram.token, "api_url": telegram.api_url, "poll_timeout": 10},
    )


async def test_a_reminder_due_while_the_bot_was_down_fires_once_after_the_restart(
    telegram: FakeTelegramServer, tmp_path: Path
) -> None:
    telegram.chat(777)
    telegram.chat(-100, kind="group", title="Team")
    settings = settings_for(telegram, tmp_path / "data")
    agent = build_agent(settings, model=ScriptedModel(remind))
    await agent.start()
    try:
        schedules = schedules_of(agent)
        due = datetime.now(UTC) + timedelta(seconds=2)
        await schedules.once(
            telegram_chat,
            ChatArgs(chat_id=777),
            at=due,
            text="call the bank",
            creator="telegram:777",
            tz="Europe/Paris",
        )
        await schedules.once(
            telegram_chat, ChatArgs(chat_id=-100), at=due, text="Stand-up now!", kind=ScheduleKind.TEXT
        )
    finally:
        await agent.stop()
    while datetime.now(UTC) < due + timedelta(seconds=0.5):  # the bot is down when they are due
        await asyncio.sleep(0.1)
    assert telegram.sent == []
    agent = build_agent(settings, model=ScriptedModel(remind))
    await agent.start()
    try:
        [reminder] = await telegram.wait_replies(1, chat_id=777)
        [stand_up] = await telegram.wait_replies(1, chat_id=-100)
        await asyncio.sleep(1.0)  # a second firing would show now
        assert await schedules_of(agent).pending() == 0
    finally:
        await agent.stop()
    assert reminder.text == "Reminder: call the bank"
    assert stand_up.text == "Stand-up now!"
    assert len(telegram.sent) == 2
