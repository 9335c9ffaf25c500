"""A spoken reply on the web chat through the fleet (issue 41): ``bots gateway`` holds the page, a ``bots worker``
runs the conversation and has the fake speech server speak the answer (``/voice on``, set on the gateway, read by
the worker from Redis); the bytes reach the gateway through the relay (Redis pub/sub), which keeps them and sends
the page their address on its own origin. Real processes, a real redis-server."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots.models import SCRIPTED_REPLY
from core.media.spoken import speakable
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fleet.deployment import Processes, deployment_env
from tests.fleet.server import REDIS_SERVER, RedisServer, free_port

from .conftest import WEB_SECRET, client
from .test_fleet import _up
from .test_media import Page

pytestmark = pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="needs redis-server")


async def test_a_workers_spoken_reply_reaches_the_page_held_by_the_gateway(tmp_path: Path) -> None:
    redis_server = RedisServer(tmp_path / "redis")
    redis_server.start()
    web_port = free_port()
    try:
        async with FakeOpenAIServer() as speech:
            env = deployment_env(
                redis_server,
                tmp_path,
                LLM_PROVIDER="scripted",
                WEB_PORT=str(web_port),
                WEB_SECRET=WEB_SECRET,
                TTS_BASE_URL=speech.url,
                REDIS_LEASE_SECONDS="3",
            )
            chat_url = f"http://127.0.0.1:{web_port}/"
            async with Processes(tmp_path, env) as fleet:
                await fleet.start("gateway")
                await fleet.start("worker")
                await _up(chat_url)
                async with client() as session:
                    page = await Page(session, chat_url).open()
                    try:
                        assert "every answer" in (await page.send("/voice on"))["notice"]
                        await page.send("hello fleet")
                        await page.until(lambda e: e.get("op") in ("post", "edit") and e.get("text") == SCRIPTED_REPLY)
                        media = await page.until(lambda e: e.get("op") == "media")
                    finally:
                        page.close()
                    assert media["kind"] == "voice" and "data" not in media
                    async with session.get(chat_url + media["url"]) as response:
                        assert response.status == 200 and response.headers["Content-Type"] == "audio/ogg"
                        assert await response.read() == speech.speech
                spoken = [r.body["input"] for r in speech.requests if r.path.endswith("/audio/speech")]
                assert spoken == [speakable(SCRIPTED_REPLY, 1000)]  # (read aloud: LLM_PROVIDER's _ is a space)
    finally:
        redis_server.stop()
