"""End to end through Redis: ``bots gateway`` stores only references to what people send, ``bots worker``
fetches the bytes when it runs the chat (getFile and the download, through PTB), transcribes voice notes,
shows pictures to the model, and turns a download that keeps failing into a note instead of losing the
message (Telegram; Discord likewise for a picture). Real processes, a real redis-server, the fake Bot API
or the fake Discord, and the fake OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 16
ANSWER = '<response><output type="telegram:message">Got it.</output></response>'


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(default=Reply(chunks=(ANSWER,))) as server:
        server.transcript = "please book a table for two"
        yield server


async def test_the_gateway_stores_references_and_the_worker_reads_them(
    redis_server: RedisServer, telegram: FakeTelegramServer, llm: FakeOpenAIServer, client: Any, tmp_path: Path
) -> None:
    env = deployment_env(
        redis_server,
        tmp_path,
        telegram=telegram,
        REDIS_LEASE_SECONDS="10",  # (a 1 s lease starved of renewals at a load of 9: the batch ran again and fetched twice)
        TELEGRAM_POLL_TIMEOUT="1",
        TELEGRAM_STREAM_REPLIES="false",
        LLM_PROVIDER="openai",
        LLM_BASE_URL=llm.url,
        LLM_MODEL="vision-model",
        LLM_RETRIES="0",
        STT_BASE_URL=llm.url,
        STT_MODEL="whisper-test",
    )
    async with Processes(tmp_path, env) as procs:
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
    assert sorted(r.chat_id for r in replies) == [4001, 4002, 4003] and {r.text for r in replies} == {"Got it."}
    chats = [r for r in llm.requests if r.path.endswith("/chat/completions")]
    seen = {json.dumps(r.body["messages"][1]["content"]) for r in chats}
    assert any("data:image/jpeg;base64," in s and "is this ripe?" in s for s in seen)
    assert any("please book a table for two" in s for s in seen)
    assert any("the file could not be downloaded from telegram (tried 3 times)" in s for s in seen)
    assert [r.body["model"] for r in llm.requests if r.path.endswith("/audio/transcriptions")] == ["whisper-test"]
    assert len(telegram.calls_of("getFile")) == 2 + 3  # photo and voice once each, the document three times


async def test_a_discord_worker_fetches_an_image_the_gateway_only_referenced(
    redis_server: RedisServer, discord: FakeDiscord, llm: FakeOpenAIServer, tmp_path: Path
) -> None:
    llm.default = Reply(chunks=('<response><output type="discord:message">A red square.</output></response>',))
    env = deployment_env(
        redis_server,
        tmp_path,
        discord=discord,
        DISCORD_STREAM_REPLIES="false",
        LLM_PROVIDER="openai",
        LLM_BASE_URL=llm.url,
        LLM_MODEL="vision-model",
        LLM_RETRIES="0",
    )
    png = b"\x89PNG\r\n\x1a\n" + bytes(1000)
    async with Processes(tmp_path, env) as procs:
        await procs.start("worker")
        gateway = await procs.start("gateway")
        user = discord.user("ann")
        dm = discord.dm_channel(user)
        await wait_until(lambda: "gateway listening" in procs.log_of(gateway), timeout=60, what="the gateway")
        await discord.wait_until(lambda: discord.shards_connected() == {0}, timeout=60)  # its one shard
        await discord.say(dm, "what colour?", author=user, files=[("square.png", "image/png", png)])
        [reply] = await discord.wait_posted(dm, timeout=60)
    assert reply["content"] == "A red square."
    assert len(discord.downloads) == 1
    [chat] = [r for r in llm.requests if r.path.endswith("/chat/completions")]
    content = json.dumps(chat.body["messages"][1]["content"])
    assert "data:image/png;base64," in content and "what colour?" in content
