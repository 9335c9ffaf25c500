"""The console's Knowledge page, on the bot as ``bots run`` builds it (``KNOWLEDGE_ENABLED``): behind the login,
every change refused without the session's CSRF token or from another origin; documents added from a folder and
listed by collection (titles escaped), a bad collection name refused, a conversation limited to a collection and the
limit lifted, a document removed; and the same in headless Chromium, as a person clicks it."""

from __future__ import annotations

from pathlib import Path

from selenium.webdriver.common.by import By

from core.knowledge import KNOWLEDGE, Knowledge
from tests.knowledge.support import write_corpus

from .browser import Browser
from .conftest import SECRET, Bot, StartBot, client, login, scripted


def knowledge_of(bot: Bot) -> Knowledge:
    found = bot.agent.provided(KNOWLEDGE)
    assert found is not None
    return found


async def test_the_knowledge_page_adds_limits_and_removes_with_csrf(start_bot: StartBot, tmp_path: Path) -> None:
    bot = await start_bot(scripted("ok"), knowledge={"enabled": True})
    folder = write_corpus(tmp_path / "docs")
    (folder / "evil.md").write_text("# Evil <script>alert(1)</script>\n\nText.\n", encoding="utf-8")
    store = knowledge_of(bot).store
    page = bot.console_url + "knowledge"
    async with client() as session:
        async with session.get(page) as response:
            assert response.url.path == "/login"
        csrf = await login(session, bot)
        add = {"csrf": csrf, "collection": "hr", "sources": f"{folder}\n"}
        async with session.post(page + "/add", data={**add, "csrf": "wrong"}) as response:
            assert response.status == 403
        async with session.post(page + "/add", data=add, headers={"Origin": "http://elsewhere.example"}) as response:
            assert response.status == 403
        assert await store.documents() == []

        async with session.post(page + "/add", data=add) as response:
            html = await response.text()
        assert response.url.path == "/knowledge"
        assert "hr: 3 added, 0 changed, 0 unchanged, 0 removed, 0 failed" in html
        assert "Collection hr" in html and "Acme Handbook" in html and "Acme FAQ" in html
        assert "Evil &lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
        async with session.post(page + "/add", data={**add, "collection": "h r"}) as response:
            assert response.status == 400
        async with session.post(page + "/add", data={**add, "sources": ""}) as response:  # read them all again
            assert "hr: 0 added, 0 changed, 3 unchanged" in await response.text()

        scope = {"csrf": csrf, "cid": "telegram:chat:42", "collections": "hr"}
        async with session.post(page + "/scope", data={**scope, "csrf": ""}) as response:
            assert response.status == 403
        async with session.post(page + "/scope", data=scope) as response:
            assert "telegram:chat:42 searches hr" in await response.text()
        assert await store.scope("telegram:chat:42") == ("hr",)
        async with session.post(page + "/scope", data={**scope, "collections": "../etc"}) as response:
            assert response.status == 400
        async with session.post(page + "/scope", data={**scope, "collections": ""}) as response:
            assert "telegram:chat:42 searches the default collections" in await response.text()
        assert await store.scope("telegram:chat:42") is None

        evil = str((folder / "evil.md").resolve())
        remove = {"csrf": csrf, "collection": "hr", "source": evil}
        async with session.post(page + "/remove", data={**remove, "csrf": "x"}) as response:
            assert response.status == 403
        async with session.post(page + "/remove", data=remove) as response:
            html = await response.text()
        assert f"{evil} removed from hr" in html and "Evil &lt;script&gt;" not in html.split("</p>", 2)[-1]
        assert sorted(d.title for d in await store.documents()) == ["Acme FAQ", "Acme Handbook"]


async def test_a_bot_without_the_knowledge_base_says_how_to_turn_it_on(start_bot: StartBot) -> None:
    bot = await start_bot(scripted("ok"))
    async with client() as session:
        csrf = await login(session, bot)
        async with session.get(bot.console_url + "knowledge") as response:
            assert "KNOWLEDGE_ENABLED=true" in await response.text()
        data = {"csrf": csrf, "collection": "hr", "sources": "/tmp"}
        async with session.post(bot.console_url + "knowledge/add", data=data) as response:
            assert response.status == 400


async def test_the_knowledge_page_in_a_browser(browser: Browser, start_bot: StartBot, tmp_path: Path) -> None:
    bot = await start_bot(scripted("ok"), knowledge={"enabled": True})
    folder = write_corpus(tmp_path / "docs")
    await browser.get(bot.console_url + "knowledge")
    await browser.type("#secret", SECRET)
    await browser.click("button[type=submit]")
    await browser.wait_for(lambda: browser.driver.current_url.endswith("/fleet"), what="the fleet page")
    await browser.get(bot.console_url + "knowledge")
    assert "No document yet." in await browser.source()

    await browser.type("input[name=collection]", "\b" * 10 + "shop")
    await browser.type("textarea[name=sources]", str(folder / "faq.html"))
    await browser.click("form[action='/knowledge/add'] button")
    await browser.wait_for(lambda: "1 added" in browser.driver.find_element(By.CSS_SELECTOR, ".flash").text)
    assert await browser.text("h2") == "Collection shop"
    assert "Acme FAQ" in await browser.texts("td")

    await browser.type("input[name=cid]", "telegram:chat:7")
    await browser.type("input[name=collections]", "shop")
    await browser.click("form[action='/knowledge/scope'] button")
    await browser.wait_for(lambda: "searches shop" in browser.driver.find_element(By.CSS_SELECTOR, ".flash").text)
    assert await knowledge_of(bot).store.scope("telegram:chat:7") == ("shop",)
    await browser.screenshot("console-knowledge")

    await browser.click("button.danger")
    await browser.accept_alert()
    await browser.wait_for(lambda: "removed from shop" in browser.driver.find_element(By.CSS_SELECTOR, ".flash").text)
    assert "No document yet." in await browser.source()
    assert await knowledge_of(bot).store.documents() == []
