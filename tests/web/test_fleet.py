"""The web chat and the console through the fleet: ``bots gateway`` and two ``bots worker`` processes on one
redis-server (scripted model). The gateway holds the browser's page, a worker runs the conversation, the answer
reaches the page through the gateway's channel; the console shows the processes alive and a dead-lettered batch,
which is run again until it is answered."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import aiohttp
import pytest
from selenium.webdriver.common.by import By

from bots.models import SCRIPTED_REPLY
from core.entries import InputRef
from tests.fleet.deployment import Processes, deployment_env
from tests.fleet.server import REDIS_SERVER, RedisServer, free_port

from .browser import Browser
from .conftest import SECRET, WEB_SECRET

pytestmark = pytest.mark.skipif(not Path(REDIS_SERVER).exists(), reason="needs redis-server")


async def _up(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(url + "healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} did not come up")
            await asyncio.sleep(0.1)


def _bot_messages(browser: Browser) -> list[str]:
    return [e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".message.bot")]


async def test_a_gateway_and_two_workers_answer_the_web_chat_and_show_on_the_console(
    browser: Browser, tmp_path: Path
) -> None:
    redis_server = RedisServer(tmp_path / "redis")
    redis_server.start()
    web_port, console_port = free_port(), free_port()
    env = deployment_env(
        redis_server,
        tmp_path,
        LLM_PROVIDER="scripted",
        WEB_PORT=str(web_port),
        WEB_SECRET=WEB_SECRET,
        CONSOLE_SECRET=SECRET,
        CONSOLE_PORT=str(console_port),
        REDIS_LEASE_SECONDS="3",
    )
    chat_url, console_url = f"http://127.0.0.1:{web_port}/", f"http://127.0.0.1:{console_port}/"
    try:
        async with Processes(tmp_path, env) as fleet:
            await fleet.start("gateway")
            await fleet.start("worker")
            await fleet.start("worker")
            await _up(chat_url)
            await _up(console_url)

            # the web chat, held by the gateway, answered by a worker
            await browser.get(chat_url)
            await browser.wait_for(
                lambda: browser.driver.find_element(By.ID, "status").get_attribute("data-state") == "ready"
            )
            await browser.type("#text", "hello fleet\n")
            await browser.wait_for(lambda: _bot_messages(browser) == [SCRIPTED_REPLY], what="the worker's answer")
            await browser.screenshot("web-chat-fleet")
            visitor = browser.driver.get_cookie("visitor")["value"].split(".")[0]
            chat_tab = browser.driver.current_window_handle

            # the console: the processes alive
            await browser.run(browser.driver.switch_to.new_window, "tab")
            await browser.get(console_url + "login")
            await browser.type("#secret", SECRET)
            await browser.click("button[type=submit]")
            await browser.wait_for(lambda: browser.driver.current_url.endswith("/fleet"))

            def alive() -> bool:
                browser.driver.refresh()
                labels = [e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".card")]
                return any(text.startswith("1\ngateways") for text in labels) and any(
                    text.startswith("2\nworkers") for text in labels
                )

            await browser.wait_for(alive, what="one gateway and two workers on the fleet page")

            # a batch that failed for good: on the dead-letter list, run again, answered on the page
            import redis.asyncio as redis

            store = redis.Redis.from_url(redis_server.url, decode_responses=True)
            try:
                members = [json.loads(m) for m in await store.zrange("bots:presence", 0, -1)]
                assert sorted(m["role"] for m in members) == ["gateway", "worker", "worker"]
                gateway = next(m["id"] for m in members if m["role"] == "gateway")
                ref = InputRef(
                    type="web:message",
                    data="run me again",
                    params={"user": "visitor", "user_id": visitor, "message_id": "dead1", "gateway": gateway},
                )
                entry = {"c": "web:chat", "a": visitor, "i": ref.model_dump(mode="json"), "t": time.time() - 60}
                dead = {"cid": f"web:chat:{visitor}", "id": "7", "entries": [entry]}
                await store.rpush("bots:dead", json.dumps(dead))
                await browser.get(console_url + "fleet")
                assert await browser.texts("td a code") == [f"web:chat:{visitor}"]
                await browser.screenshot("console-fleet-redis")
                await browser.click("button[value=run]")
                await browser.wait_for(
                    lambda: "back in the inbox" in browser.driver.find_element(By.CSS_SELECTOR, ".flash").text
                )
                assert await store.llen("bots:dead") == 0
            finally:
                await store.aclose()
            console_tab = browser.driver.current_window_handle
            await browser.run(browser.driver.switch_to.window, chat_tab)
            await browser.wait_for(
                lambda: _bot_messages(browser) == [SCRIPTED_REPLY, SCRIPTED_REPLY], what="the batch run again"
            )

            # the live tail of the conversation, on the gateway's console, of the runs a worker does
            await browser.run(browser.driver.switch_to.window, console_tab)
            await browser.get(console_url + f"conversation?cid=web:chat:{visitor}")
            await browser.wait_for(lambda: "watching" in browser.driver.find_element(By.ID, "tail").text)
            for attempt in range(10):  # the workers look for watched conversations every couple of seconds
                await browser.run(browser.driver.switch_to.window, chat_tab)
                await browser.type("#text", f"tail me {attempt}\n")
                expected = 3 + attempt
                await browser.wait_for(lambda n=expected: len(_bot_messages(browser)) == n, what="an answer")
                await browser.run(browser.driver.switch_to.window, console_tab)
                try:
                    await browser.wait_for(
                        lambda: (
                            "output_text_done web:message (final)" in browser.driver.find_element(By.ID, "tail").text
                        ),
                        timeout=3,
                    )
                    break
                except AssertionError:
                    continue
            assert SCRIPTED_REPLY in await browser.text("#tail")
            await browser.screenshot("console-tail-fleet")
    finally:
        redis_server.stop()
