"""Stop in the web chat (issue 37): ``/stop`` sent from the page during a slow streamed answer cancels the model call
and the answer keeps what was written with its mark (no later action runs); the page's Stop button, shown while the
bot writes, does the same in a real headless Chromium."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from selenium.webdriver.common.by import By

from core import action
from core.engine import STOP_MARK
from extensions.chat.i18n import say
from extensions.web.definitions import MESSAGE
from tests.fakes.slow_model import EndlessModel

from .browser import Browser
from .conftest import StartBot, client, csrf_of


async def test_stop_from_the_page_cancels_the_answer_being_written(start_bot: StartBot) -> None:
    model, ran = EndlessModel(MESSAGE), []
    bot = await start_bot(model)
    later = action(name="later", handler=lambda args, ctx, agent: ran.append(1))
    bot.agent.add_action_source(lambda state: [later])
    shown: list[dict[str, Any]] = []
    async with client() as session:
        async with session.get(bot.chat_url) as response:
            csrf = csrf_of(await response.text())
        headers = {"X-CSRF-Token": csrf}
        async with session.get(bot.chat_url + "chat/events") as events:
            await events.content.readuntil(b'"ready"}\n\n')

            async def read_until(done: Any) -> None:
                async with asyncio.timeout(10):
                    while not done():
                        line = await events.content.readline()
                        if line.startswith(b"data: "):
                            shown.append(json.loads(line[6:]))

            async with session.post(bot.chat_url + "chat/send", json={"text": "tell me a story"}, headers=headers):
                pass
            await read_until(lambda: any("Once upon a time" in e.get("text", "") for e in shown))
            async with session.post(bot.chat_url + "chat/send", json={"text": "/stop"}, headers=headers) as response:
                assert (await response.json()) == {"notice": say("stop_done")}
            await read_until(lambda: any(str(e.get("text", "")).endswith(STOP_MARK) for e in shown))
            async with session.post(bot.chat_url + "chat/send", json={"text": "/stop"}, headers=headers) as response:
                assert (await response.json()) == {"notice": say("stop_nothing")}
    assert model.cancelled and ran == []


async def test_the_stop_button_shows_while_the_bot_writes_and_stops_it(browser: Browser, start_bot: StartBot) -> None:
    model = EndlessModel(MESSAGE)
    bot = await start_bot(model)
    await browser.get(bot.chat_url)
    await browser.wait_for(
        lambda: browser.driver.find_element(By.ID, "status").get_attribute("data-state") == "ready", what="connected"
    )
    assert not browser.driver.find_element(By.ID, "stop").is_displayed()
    await browser.type("#text", "tell me a story\n")
    await browser.wait_for(
        lambda: any(
            "Once upon a time" in e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".message.bot")
        ),
        what="the answer being written",
    )
    assert browser.driver.find_element(By.ID, "stop").is_displayed()
    await browser.screenshot("web-chat-stop")
    await browser.click("#stop")
    await browser.wait_for(
        lambda: any(e.text.endswith(STOP_MARK) for e in browser.driver.find_elements(By.CSS_SELECTOR, ".message.bot")),
        what="the answer marked stopped",
    )
    await browser.wait_for(
        lambda: say("stop_done") in [e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".message.notice")],
        what="the notice",
    )
    assert model.cancelled
    assert not browser.driver.find_element(By.ID, "stop").is_displayed()
