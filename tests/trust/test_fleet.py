"""Tiers in a fleet: ``bots gateway`` asks Telegram who administers a group and carries each author's tier with the
message through Redis; ``bots worker`` reads it and never asks. With the default policy (MCP tools for admins), a
member's request never reaches the MCP server run by the worker, and the group admin's does."""

from __future__ import annotations

import json
from pathlib import Path

from extensions.telegram.definitions import MESSAGE
from tests.bots_fleet import DEADLINE, Process, model_settings, start_fleet, stop_all
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer
from tests.mcp.support import logged_config

GROUP, MEMBER, ADMIN = -100700, 1001, 2002


def reply(text: str) -> Reply:
    return Reply(chunks=(text,))


async def test_the_gateway_s_tier_decides_in_the_worker(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    calls = tmp_path / "calls.log"
    config = logged_config(calls)
    call = '<response><action_call name="tools:open_ticket">{"title": "printer"}</action_call></response>'
    said = f'<response><output type="{MESSAGE}">Done what I could.</output></response>'
    telegram.chat(GROUP, kind="supergroup")
    telegram.admins[GROUP] = {ADMIN}
    async with FakeOpenAIServer(replies=[reply(call), reply(said), reply(call), reply(said)]) as model:
        shared = model_settings(redis_server, telegram, model.url, MCP_SERVERS=json.dumps([config]))
        gateway, [worker] = await start_fleet(tmp_path, shared, processes)

        telegram.user_says("@daydream_test_bot open a ticket", user_id=MEMBER, chat_id=GROUP)
        notice, answer = await telegram.wait_replies(2, chat_id=GROUP, timeout=DEADLINE)
        assert "⛔" in notice.text and "admin" in notice.text and answer.text == "Done what I could."
        assert not calls.exists()
        first = json.dumps(model.requests[0].body)
        assert 'tier=\\"member\\"' in first and "open_ticket" not in first.split("<working-memory>\\n")[0]

        telegram.user_says("@daydream_test_bot open a ticket", user_id=ADMIN, chat_id=GROUP)
        await telegram.wait_replies(3, chat_id=GROUP, timeout=DEADLINE)
        assert calls.read_text().splitlines() == ["open_ticket printer"]
        assert 'tier=\\"admin\\"' in json.dumps(model.requests[2].body)
        asked = {c.token for c in telegram.calls_of("getChatAdministrators")}
        assert len(telegram.calls_of("getChatAdministrators")) == 1 and asked  # once, by the gateway
        refused = await worker.wait_for("action tools:open_ticket refused (tier member)")
        assert refused.get("correlation_id", "").startswith("telegram:")
    await stop_all(gateway, worker)
