"""The real pages in a real headless Chromium: the operator console and the web chat.

Each test writes a screenshot of every page it visits (``<tmp>/screenshots``, copied to ``docs/screenshots``).
"""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By

from core.memory.history import HISTORY
from extensions.telegram import TelegramSettings
from tests.fakes.telegram_server import FakeTelegramServer

from .browser import Browser
from .conftest import SECRET, StartBot, scripted

SAID = "where is the lighthouse of Alexandria"
ANSWER = "It stood on the island of Pharos, in Alexandria's harbour, until the fourteenth century."


async def test_console_shows_a_telegram_conversation_reads_it_and_forgets_it(
    browser: Browser, start_bot: StartBot, telegram: FakeTelegramServer
) -> None:
    bot = await start_bot(
        scripted(ANSWER),
        platforms=["telegram", "web"],
        telegram={"token": telegram.token, "api_url": telegram.api_url, "poll_timeout": 10},
        bot={"tokens_per_day_user": 5000, "tokens_per_day_conversation": 20000},
        llm={"provider": "scripted", "prices": "scripted=0.5/1.5"},
    )
    assert isinstance(bot.settings.telegram, TelegramSettings)
    telegram.user_says(SAID, user_id=4242, first_name="Ann")
    [reply] = await telegram.wait_replies(1)
    assert reply.text == ANSWER

    # not logged in: every page sends to the login form, which shows nothing of the bot
    await browser.get(bot.console_url + "conversations")
    assert (await browser.url()).endswith("/login")
    await browser.screenshot("console-login")
    assert SAID not in await browser.source()

    # a wrong secret: refused, still nothing shown
    await browser.type("#secret", "not the secret at all")
    await browser.click("button[type=submit]")
    await browser.wait_for(lambda: browser.driver.find_element(By.CSS_SELECTOR, ".error"), what="the refusal")
    assert "Not allowed." in await browser.text(".error")
    assert (await browser.url()).endswith("/login")

    await browser.type("#secret", SECRET)
    await browser.click("button[type=submit]")
    await browser.wait_for(lambda: browser.driver.current_url.endswith("/fleet"), what="the fleet page")
    await browser.screenshot("console-fleet")

    await browser.get(bot.console_url + "conversations")
    links = await browser.texts("td a code")
    assert "telegram:chat:4242" in links
    assert SAID not in await browser.source()  # a list shows no message text
    await browser.type("#q", "lighthouse")
    await browser.click("form.search button")
    await browser.wait_for(lambda: "q=lighthouse" in browser.driver.current_url, what="the search")
    assert await browser.texts("td a code") == ["telegram:chat:4242"]
    await browser.screenshot("console-conversations")

    await browser.click("td a")
    await browser.wait_for(lambda: "/conversation?cid=" in browser.driver.current_url, what="the conversation")
    texts = await browser.texts("tr.entry td:last-child")
    assert texts == [SAID, ANSWER]
    await browser.wait_for(lambda: "watching" in browser.driver.find_element(By.ID, "tail").text, what="the tail")
    await browser.screenshot("console-conversation")

    # the run's usage is counted as its model stream ends, which may be after the reply was posted: the page is
    # loaded again until it shows it
    def usage_shown() -> bool:
        browser.driver.get(bot.console_url + "usage")
        return bool(browser.driver.find_elements(By.CSS_SELECTOR, "svg title"))

    await browser.wait_for(usage_shown, timeout=30, what="the usage of the answer")
    assert "telegram:4242" in await browser.source()
    await browser.screenshot("console-usage", full=True)

    await browser.get(bot.console_url + "settings")
    source = await browser.source()
    assert SECRET not in source and telegram.token not in source
    assert "CONSOLE_SECRET" in source and "ready" in await browser.text("h2 span")
    await browser.screenshot("console-settings")

    # forget it: the confirmation, then it is gone from the list and from the history
    await browser.get(bot.console_url + "conversation?cid=telegram:chat:4242")
    await browser.click("button.danger")
    await browser.accept_alert()
    await browser.wait_for(lambda: "forgotten" in browser.driver.find_element(By.CSS_SELECTOR, ".flash").text)
    assert "telegram:chat:4242" not in await browser.texts("td a code")
    assert bot.agent.provided(HISTORY) is not None
    assert await bot.agent.provided(HISTORY).search("telegram:chat:4242") == []


async def test_web_chat_streams_the_answer_as_it_is_written(browser: Browser, start_bot: StartBot) -> None:
    import asyncio

    from core import ModelRequest

    long_answer = "Streaming works: " + " ".join(f"word{i}" for i in range(40)) + "."
    gate = asyncio.Event()

    class HeldModel:
        name = "held"
        model = ""
        vision = False
        last_usage = None

        async def stream(self, request: ModelRequest) -> Any:
            text = f'<response><output type="web:message">{long_answer}</output></response>'
            cut = text.index("word5")
            yield text[:cut]
            await gate.wait()  # the page must show the first words before the rest is written
            for i in range(cut, len(text), 12):
                yield text[i : i + 12]

    bot = await start_bot(HeldModel())
    await browser.get(bot.chat_url)
    await browser.wait_for(
        lambda: browser.driver.find_element(By.ID, "status").get_attribute("data-state") == "ready", what="connected"
    )
    await browser.type("#text", "tell me about streaming\n")
    partial = await browser.wait_for(
        lambda: [e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".message.bot")], what="the first words"
    )
    assert partial[0].startswith("Streaming works:") and partial[0] != long_answer  # shown while written
    await browser.screenshot("web-chat-streaming")
    gate.set()
    await browser.wait_for(
        lambda: [e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".message.bot")] == [long_answer],
        what="the whole answer",
    )
    assert await browser.texts(".message.user") == ["tell me about streaming"]
    await browser.screenshot("web-chat")

    # a reload reads the conversation back; /forget erases it
    await browser.get(bot.chat_url)
    await browser.wait_for(lambda: len(browser.driver.find_elements(By.CSS_SELECTOR, ".message")) == 2)
    await browser.wait_for(
        lambda: browser.driver.find_element(By.ID, "status").get_attribute("data-state") == "ready", what="connected"
    )
    await browser.type("#text", "/forget\n")
    await browser.wait_for(lambda: browser.driver.find_elements(By.CSS_SELECTOR, ".message.notice"), what="notice")
    assert bot.agent.provided(HISTORY) is not None
    assert [c.cid for c in await bot.agent.provided(HISTORY).conversations()] == []  # type: ignore[attr-defined]


RICH_ANSWER = (
    "## Lighthouses of the ancient world\n\n"
    "The **Pharos** was the tallest; two others are known by *name* only:\n\n"
    "| lighthouse | built | height |\n"
    "|---|---|--:|\n"
    "| Pharos of Alexandria | 280 BC | 100 m |\n"
    "| Tower of Hercules | 2nd century | 55 m |\n"
    "| Lighthouse of Ostia | 50 AD | 30 m |\n\n"
    "- Pharos stood until 1375\n"
    "- the Tower of Hercules still guides ships: [its page](https://whc.unesco.org/en/list/1312)\n\n"
    "```\nheights from ancient accounts\n```\n\n"
    '<script>window.injected = 1</script><img src=x onerror="window.injected = 2">'
)


async def test_web_chat_lays_out_a_finished_answer_and_runs_nothing_in_it(
    browser: Browser, start_bot: StartBot
) -> None:
    """An answer with a table is laid out once complete (a real ``<table>``), in the page and after a reload; the
    script and the ``onerror`` written in it are shown as text and never run."""
    bot = await start_bot(scripted(RICH_ANSWER))
    await browser.get(bot.chat_url)
    await browser.wait_for(
        lambda: browser.driver.find_element(By.ID, "status").get_attribute("data-state") == "ready", what="connected"
    )
    await browser.type("#text", "compare the lighthouses of the ancient world\n")

    def table_rows() -> list[list[str]]:
        rows = browser.driver.find_elements(By.CSS_SELECTOR, ".message.bot .rich table tr")
        return [[cell.text for cell in row.find_elements(By.CSS_SELECTOR, "th, td")] for row in rows]

    rows = await browser.wait_for(table_rows, what="the answer's table")
    assert rows[0] == ["lighthouse", "built", "height"] and rows[1] == ["Pharos of Alexandria", "280 BC", "100 m"]
    assert await browser.texts(".message.bot .rich h2") == ["Lighthouses of the ancient world"]
    assert len(await browser.texts(".message.bot .rich li")) == 2
    link = await browser.run(lambda: browser.driver.find_element(By.CSS_SELECTOR, ".message.bot .rich a"))
    assert link.get_attribute("href") == "https://whc.unesco.org/en/list/1312"
    shown = await browser.text(".message.bot .rich")
    assert "<script>window.injected = 1</script>" in shown  # the answer's HTML shown as written
    assert await browser.run(lambda: browser.driver.execute_script("return window.injected === undefined"))
    assert not await browser.run(lambda: browser.driver.find_elements(By.CSS_SELECTOR, ".message script, .message img"))
    await browser.wait_for(
        lambda: not browser.driver.find_element(By.ID, "stop").is_displayed(), what="the Stop button gone"
    )
    await browser.screenshot("web-chat-rich")

    await browser.get(bot.chat_url)  # the history lays the answer out too
    await browser.wait_for(table_rows, what="the table read back")
    assert await browser.run(lambda: browser.driver.execute_script("return window.injected === undefined"))
