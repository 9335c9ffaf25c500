"""End to end through Redis: ``bots gateway`` stores only references to what people send, ``bots worker``
fetches the bytes when it runs the chat (getFile and the download, through PTB), transcribes voice notes,
shows pictures to the model, and turns a download that keeps failing into a note instead of losing the
message (Telegram; Discord likewise for a picture). Real processes, a real redis-server, the fake Bot API
or the fake Discord, and the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .server import RedisServer
from .test_e2e_telegram import Processes

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 16
ANSWER = '<response><output type="telegram:message">Got it.</output></response>'


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegramServer]:
    fake = FakeTelegramServer()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(default=Reply(chunks=(ANSWER,))) as server:
        server.transcript = "please book a table for two"
        yield server


async def test_the_gateway_stores_references_and_the_worker_reads_them(
    redis_server: RedisServer, telegram: FakeTelegramServer, llm: FakeOpenAIServer, client: Any, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "TELEGRAM_", "REDIS_", "LLM_", "BOT_"))}
    env.update(
        REDIS_URL=redis_server.url,
        REDIS_LEASE_SECONDS="1",
        TELEGRAM_TOKEN=telegram.token,
        TELEGRAM_API_URL=telegram.api_url,
        TELEGRAM_POLL_TIMEOUT="1",
        TELEGRAM_STREAM_REPLIES="false",
        LLM_PROVIDER="openai",
        LLM_BASE_URL=llm.url,
        LLM_MODEL="vision-model",
        LLM_RETRIES="0",
        STT_BASE_URL=llm.url,
        STT_MODEL="whisper-test",
        BOT_DATA_DIR=str(tmp_path / "data"),
        HTTP_PORT="0",
    )
    procs = Processes(tmp_path, env)
    try:
        await procs.start("gateway")
        photo = telegram.user_sends("photo", JPEG, caption="is this ripe?", user_id=4001)
        telegram.user_sends("voice", b"OggS" + bytes(500), user_id=4002)
        doc = telegram.user_sends("document", b"a,b\n1,2\n", file_name="data.csv", mime_type="text/csv", user_id=4003)
        doc_id = doc["message"]["document"]["file_id"]
        telegram.fail(
            "getFile",
            status=500,
            description="Internal Server Error",
            times=3,
            when=lambda p: p.get("file_id") == doc_id,
        )

        async def stored() -> list[str]:
            return [e for key in await client.keys("bots:{*}:inbox") for e in await client.lrange(key, 0, -1)]

        async def three_stored() -> bool:
            return len(await stored()) >= 3

        await wait_until(three_stored, timeout=30, what="three messages stored")
        entries = await stored()
        assert telegram.calls_of("getFile") == [] and telegram.downloads == []  # the gateway fetched nothing
        photo_entry = next(e for e in entries if "is this ripe?" in e)
        [attachment] = json.loads(photo_entry)["i"]["attachments"]
        assert attachment["source"] == "telegram" and attachment["kind"] == "image"
        assert attachment["ref"] == photo["message"]["photo"][-1]["file_id"]
        assert len(photo_entry) < 2000  # a reference, not the picture

        await procs.start("worker")
        replies = await telegram.wait_replies(3, timeout=60)
    finally:
        await procs.stop_all()
    assert sorted(r.chat_id for r in replies) == [4001, 4002, 4003] and {r.text for r in replies} == {"Got it."}
    chats = [r for r in llm.requests if r.path.endswith("/chat/completions")]
    seen = {json.dumps(r.body["messages"][1]["content"]) for r in chats}
    assert any("data:image/jpeg;base64," in s and "is this ripe?" in s for s in seen)
    assert any("please book a table for two" in s for s in seen)
    assert any("the file could not be downloaded from telegram (tried 3 times)" in s for s in seen)
    assert [r.body["model"] for r in llm.requests if r.path.endswith("/audio/transcriptions")] == ["whisper-test"]
    assert len(telegram.calls_of("getFile")) == 2 + 3  # photo and voice once each, the document three times


async def test_a_discord_worker_fetches_an_image_the_gateway_only_referenced(
    redis_server: RedisServer, llm: FakeOpenAIServer, tmp_path: Path
) -> None:
    discord = FakeDiscord()
    await discord.start()
    llm.default = Reply(chunks=('<response><output type="discord:message">A red square.</output></response>',))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "TELEGRAM_", "REDIS_", "LLM_", "BOT_"))}
    env.update(
        REDIS_URL=redis_server.url,
        DISCORD_TOKEN="fake-token",
        DISCORD_API_URL=discord.api_url,
        DISCORD_GATEWAY_URL=discord.gateway_url,
        DISCORD_GUILD_READY_TIMEOUT="0.05",
        DISCORD_SYNC_COMMANDS="false",
        DISCORD_STREAM_REPLIES="false",
        LLM_PROVIDER="openai",
        LLM_BASE_URL=llm.url,
        LLM_MODEL="vision-model",
        LLM_RETRIES="0",
        BOT_DATA_DIR=str(tmp_path / "data"),
        LOG_LEVEL="INFO",
        HTTP_PORT="0",
    )
    procs = Processes(tmp_path, env)
    png = b"\x89PNG\r\n\x1a\n" + bytes(1000)
    try:
        await procs.start("worker")
        gateway = await procs.start("gateway")
        user = discord.user("ann")
        dm = discord.dm_channel(user)
        await wait_until(lambda: "gateway listening" in procs.log_of(gateway), timeout=60, what="the gateway")
        await discord.wait_until(lambda: discord.shards_connected() == {0}, timeout=60)  # its one shard
        await discord.say(dm, "what colour?", author=user, files=[("square.png", "image/png", png)])
        [reply] = await discord.wait_posted(dm, timeout=60)
    finally:
        await procs.stop_all()
        await discord.close()
    assert reply["content"] == "A red square."
    assert len(discord.downloads) == 1
    [chat] = [r for r in llm.requests if r.path.endswith("/chat/completions")]
    content = json.dumps(chat.body["messages"][1]["content"])
    assert "data:image/png;base64," in content and "what colour?" in content
