"""End to end through webhook mode: the fake posts updates to PTB's webhook server with the secret header."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp

from core import ModelRequest
from tests.fakes.telegram_server import FakeTelegramServer
from tests.ports import free_port

from .conftest import StartBot, answer

SECRET = "s3cret_Token-for-tests-0123456789abcdef"


class WaitsForTheWebhookAnswer:
    """A model that answers only once Telegram (the fake) got its 200: proof the webhook answers before the run."""

    name = "waits-for-200"
    model = ""
    vision = False
    last_usage = None

    def __init__(self, server: FakeTelegramServer) -> None:
        self.server = server

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        await self.server.wait_for(lambda: any(status == 200 for _, status in self.server.webhook_deliveries))
        yield answer("via webhook")


async def test_webhook_mode_answers_and_checks_the_secret(server: FakeTelegramServer, start_bot: StartBot) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram/hook"
    agent = await start_bot(
        WaitsForTheWebhookAnswer(server),
        mode="webhook",
        webhook_url=url,
        webhook_listen="127.0.0.1",
        webhook_port=port,
        webhook_secret=SECRET,
    )
    assert (server.webhook_url, server.webhook_secret) == (url, SECRET)
    update = server.user_says("hello over the webhook")
    [reply] = await server.wait_replies(1)
    assert reply.text == "via webhook"
    assert reply.reply_to == update["message"]["message_id"]
    assert server.webhook_deliveries[0] == (update["update_id"], 200)
    assert server.calls_of("getUpdates") == []

    server.push(update)  # Telegram re-sends an update it thinks was lost: answered once
    forged = server.user_says("forged", user_id=666)
    server.pending.remove(forged)  # delivered by an impostor below, never by Telegram
    async with aiohttp.ClientSession() as session:
        for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": "wrong"}):
            headers["Content-Type"] = "application/json"
            async with session.post(url, data=json.dumps(forged), headers=headers) as resp:
                assert resp.status == 403
    server.user_says("after the impostor")
    await server.wait_replies(2)
    await agent.stop()  # everything delivered has been answered (or refused) by now
    assert [r.chat_id for r in server.sent] == [1001, 1001]
    assert [status for uid, status in server.webhook_deliveries if uid == update["update_id"]] == [200, 200]
