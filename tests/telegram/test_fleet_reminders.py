"""Reminders in a fleet (``bots gateway`` and ``bots worker`` processes on a real Redis, the fake Bot API, the
model behind the fake OpenAI server): the worker runs ``set_reminder`` (the schedule in Redis), the gateway answers
``/reminders`` from Redis and its Cancel button cancels there, and the worker fires the other one once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from extensions.telegram.definitions import MESSAGE
from tests.bots_fleet import DEADLINE, Process, model_settings, start_fleet, stop_all
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer

GROUP, ANN = -100900, 1001


def say(text: str) -> Reply:
    return Reply(chunks=(f'<response><output type="{MESSAGE}">{text}</output></response>',))


def call(args: dict[str, Any]) -> Reply:
    return Reply(chunks=(f'<response><action_call name="set_reminder">{json.dumps(args)}</action_call></response>',))


async def test_a_fleet_sets_lists_cancels_and_fires_reminders_once(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    telegram.chat(GROUP, kind="supergroup")
    replies = [
        call({"text": "water the plants", "in_minutes": 60}),
        say("Set for an hour."),
        call({"text": "stretch", "in_seconds": 3}),
        say("Set for 3 seconds."),
        say("Ann, time to stretch!"),
    ]
    async with FakeOpenAIServer(replies=replies) as model:
        shared = model_settings(redis_server, telegram, model.url, BOT_SCHEDULES_POLL="0.2")
        gateway, [worker] = await start_fleet(tmp_path, shared, processes)

        telegram.user_says("@daydream_test_bot remind me in an hour to water the plants", user_id=ANN, chat_id=GROUP)
        [set_hour] = await telegram.wait_replies(1, chat_id=GROUP, timeout=DEADLINE)
        assert set_hour.text == "Set for an hour."
        telegram.user_says("/reminders", user_id=ANN, chat_id=GROUP)
        [_, listing] = await telegram.wait_replies(2, chat_id=GROUP, timeout=DEADLINE)
        assert listing.text.startswith("Reminders and scheduled messages in this chat (1):")
        assert f"telegram:{ANN}: water the plants" in listing.text
        [label] = listing.buttons
        telegram.user_presses(listing, label, user_id=ANN)
        await telegram.wait_for(lambda: bool(listing.edits), timeout=DEADLINE)
        assert listing.text.endswith("No reminders or scheduled messages in this chat.")

        telegram.user_says("@daydream_test_bot remind me in 3 seconds to stretch", user_id=ANN, chat_id=GROUP)
        replies_now = await telegram.wait_replies(4, chat_id=GROUP, timeout=DEADLINE)
        assert [m.text for m in replies_now[2:]] == ["Set for 3 seconds.", "Ann, time to stretch!"]
        await asyncio.sleep(2.0)  # a second firing (or the cancelled one) would show now
        assert len([m for m in telegram.sent if m.chat_id == GROUP]) == 4
        assert len(model.requests) == 5
    await stop_all(gateway, worker)
