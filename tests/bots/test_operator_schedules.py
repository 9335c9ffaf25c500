"""The operator's schedules (``BOT_SCHEDULES``): every mistake is one line naming the entry; each entry is set once
whatever the restarts, a changed or removed one is cancelled, a text is posted as written at its time (the fake
Bot API, a manual clock); ``bots config`` shows the next firings; the ``bots_schedules_*`` metrics."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from bots import metrics
from bots.app import build_agent
from bots.config import load_settings
from bots.schedule_service import next_firings
from bots.settings import Settings
from core import ScriptedModel
from core.errors import ConfigError
from core.fleet import QueueConfig, RedisBackend, RedisScheduleStore
from core.schedules import ManualClock, Schedule, schedules_of
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer

GROUP = -100555
START = datetime(2026, 3, 2, 7, 0, tzinfo=UTC)  # a Monday, 8:00 in Paris
pytestmark = pytest.mark.usefixtures("settings_env")  # no setting from this machine, no .env but the test's own


@pytest.fixture
async def server() -> AsyncIterator[FakeTelegramServer]:
    async with FakeTelegramServer() as fake:
        yield fake


def problems(monkeypatch: pytest.MonkeyPatch, value: str, **more: str) -> list[str]:
    monkeypatch.setenv("BOT_SCHEDULES", value)
    for name, set_to in more.items():
        monkeypatch.setenv(name, set_to)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    return [line.strip() for line in str(exc.value).splitlines()[1:]]


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        ("not json", "BOT_SCHEDULES is not JSON"),
        ('{"channel": "telegram:1"}', "BOT_SCHEDULES must be a JSON list of schedules"),
        ('[{"channel": "slack:1", "every": 60, "text": "x"}]', "BOT_SCHEDULES[0]: channel 'slack:1' is not one"),
        ('[{"channel": "telegram:1", "text": "x"}]', 'BOT_SCHEDULES[0]: give either "cron" (a cron expression)'),
        ('[{"channel": "telegram:1", "cron": "0 9 * * 1"}]', 'BOT_SCHEDULES[0]: give either "prompt"'),
        ('[{"channel": "discord:2", "cron": "every monday", "text": "x"}]', "invalid cron expression 'every monday'"),
        (
            '[{"channel": "telegram:1", "every": 60, "text": "ok"}, {"channel": "telegram:1", "every": 60, '
            '"text": "x", "tz": "Mars/Olympus"}]',
            "BOT_SCHEDULES[1]: unknown time zone 'Mars/Olympus'",
        ),
        ('[{"channel": "telegram:1", "every": 60, "text": "x", "when": 3}]', "BOT_SCHEDULES[0]: when: Extra inputs"),
        # an interval the next date cannot be computed from (bots config and the start crashed on these)
        ('[{"channel": "telegram:1", "every": "nan", "text": "x"}]', 'BOT_SCHEDULES[0]: "every" is in seconds'),
        ('[{"channel": "telegram:1", "every": 1e300, "text": "x"}]', "at most 31622400 (366 days)"),
        ('[{"channel": "telegram:1", "every": "inf", "text": "x"}]', 'BOT_SCHEDULES[0]: "every" is in seconds'),
    ],
)
def test_a_wrong_entry_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, entries: str, says: str) -> None:
    [line] = problems(monkeypatch, entries)
    assert says in line, line


async def test_the_longest_interval_allowed_has_a_next_firing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_SCHEDULES", '[{"channel": "telegram:1", "every": 31622400, "text": "yearly"}]')
    lines, found = await next_firings(load_settings())
    assert found == [] and "every 3.16224e+07s" in lines[-1], lines


def test_bot_timezone_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    [line] = problems(monkeypatch, "", BOT_TIMEZONE="Europe/Pariss")
    assert line.startswith("BOT_TIMEZONE='Europe/Pariss': 'Europe/Pariss' is not a time zone")


def settings_with(server: FakeTelegramServer, tmp_path: Path, entries: list[dict[str, Any]]) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        bot={
            "data_dir": str(tmp_path / "data"),
            "platforms": "telegram",
            "schedules_poll": 0.05,
            "timezone": "Europe/Paris",
            "schedules": json.dumps(entries),
        },
        llm={"provider": "scripted"},
        telegram={"token": server.token, "api_url": server.api_url, "poll_timeout": 10},
    )


async def test_operator_schedules_are_set_once_cancelled_when_removed_and_posted_as_written(
    server: FakeTelegramServer, tmp_path: Path
) -> None:
    server.chat(GROUP, kind="supergroup", title="Team")
    standup = {"channel": f"telegram:{GROUP}", "cron": "0 9 * * 1-5", "text": "Stand-up in 5 minutes!"}
    fact = {"channel": f"telegram:{GROUP}", "every": 86400, "prompt": "Share a fun fact"}
    clock = ManualClock(START)
    model = ScriptedModel(lambda request: "<response></response>")
    ids: list[set[str]] = []
    for entries in ([standup, fact], [standup, fact], [standup]):  # started three times; the fact removed at last
        agent = build_agent(settings_with(server, tmp_path, entries), model=model, schedules_clock=clock)
        await agent.start()
        try:
            found = await schedules_of(agent).by_conversation(f"telegram:chat:{GROUP}")
            ids.append({s.id for s in found})
            assert all(s.id.startswith("op") and s.creator is None for s in found)
        finally:
            await agent.stop()
    assert len(ids[0]) == 2 and ids[1] == ids[0] and len(ids[2]) == 1 and ids[2] < ids[0]

    settings = settings_with(server, tmp_path, [standup])
    lines, trouble = await next_firings(settings)
    assert trouble == []
    [stored] = [line for line in lines if line.startswith("2026")]
    assert stored.startswith(f"2026-03-02 09:00 Europe/Paris  telegram:chat:{GROUP}  cron 0 9 * * 1-5  op")
    assert lines[-2:] == [
        "BOT_SCHEDULES (next firing of each):",
        f"  {lines[-1].strip()[:16]} Europe/Paris  telegram:{GROUP}  cron 0 9 * * 1-5  text",
    ]

    agent = build_agent(settings, model=model, schedules_clock=clock)
    await agent.start()
    try:
        await clock.set(datetime(2026, 3, 2, 8, 0, 1, tzinfo=UTC))  # 9:00:01 in Paris
        [posted] = await server.wait_replies(1, chat_id=GROUP)
        assert posted.text == "Stand-up in 5 minutes!"
        assert model.requests == []  # posted as written: the model was not asked
    finally:
        await agent.stop()


def test_the_schedule_metrics_count_by_platform() -> None:
    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    fired = sample("bots_schedules_fired_total", platform="discord")
    dropped = sample("bots_schedules_dropped_total", platform="telegram")
    late = sample("bots_schedules_late_seconds_count", platform="discord")
    metrics.observe("schedule_fired", "discord:channel:1")
    metrics.observe("schedule_late_seconds", "discord:channel:1", 0.4)
    metrics.observe("schedule_dropped", "telegram:chat:2")
    assert sample("bots_schedules_fired_total", platform="discord") == fired + 1
    assert sample("bots_schedules_late_seconds_count", platform="discord") == late + 1
    assert sample("bots_schedules_dropped_total", platform="telegram") == dropped + 1
    assert {"schedule_fired", "schedule_failed", "schedule_missed", "schedule_dropped"} <= set(metrics.KINDS)


async def test_the_pending_gauge_counts_the_stored_schedules(server: FakeTelegramServer, tmp_path: Path) -> None:
    server.chat(GROUP, kind="supergroup", title="Team")
    entries = [
        {"channel": f"telegram:{GROUP}", "cron": "0 9 * * 1-5", "text": "Stand-up in 5 minutes!"},
        {"channel": f"telegram:{GROUP}", "every": 86400, "prompt": "Share a fun fact"},
    ]
    agent = build_agent(
        settings_with(server, tmp_path, entries),
        model=ScriptedModel(lambda request: "<response></response>"),
        schedules_clock=ManualClock(START),
    )
    metrics.SCHEDULES_PENDING.set(-1)  # whatever an earlier test left: the value seen below is this bot's count
    await agent.start()
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while REGISTRY.get_sample_value("bots_schedules_pending") != 2:  # counted at start, then every 5 s
            assert asyncio.get_running_loop().time() < deadline, REGISTRY.get_sample_value("bots_schedules_pending")
            await asyncio.sleep(0.02)
    finally:
        await agent.stop()


def test_bots_config_shows_the_next_firings_stored_in_redis(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], redis_server: RedisServer
) -> None:
    from bots.cli import main

    async def store_one() -> str:
        backend = RedisBackend(QueueConfig(url=redis_server.url))
        try:
            reminder = Schedule.once(
                at=datetime(2031, 1, 6, 8, 0, tzinfo=UTC),
                text="water the plants",
                creator="telegram:42",
                conversation=f"telegram:chat:{GROUP}",
                context="telegram:chat",
                args={"chat_id": GROUP},
                tz="Europe/Paris",
            )
            await RedisScheduleStore(backend).add(reminder)
            return reminder.id
        finally:
            await backend.close()

    sid = asyncio.run(store_one())
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    main(["config"])
    shown = capsys.readouterr().out.split("next schedule firings:", 1)[1].strip().splitlines()
    assert shown[0].strip() == f"2031-01-06 09:00 Europe/Paris  telegram:chat:{GROUP}  once  {sid}  by telegram:42"
