"""Web visitor identities expire (issue 35): a visitor idle ``WEB_VISITOR_IDLE_DAYS`` is forgotten with everything
kept about their conversation (memory, history, settings, reminders) and their cookie lasts as long from their last
visit; in one process through the real web chat, the visits kept in a file under ``BOT_DATA_DIR``."""

from __future__ import annotations

import time
from typing import Any

from core import ScriptedModel
from core.memory.history import HISTORY
from core.schedules import schedules_of
from extensions.web import LocalVisitorBook, web_chat
from extensions.web.visitor_book import VISITORS_FILE

from .conftest import Bot, StartBot, answer, client, csrf_of, until
from .visiting import saved, talk, visitor_of

ANSWER = "Done."
SET = '<response><action_call name="set_reminder">{"text": "ping me", "every_minutes": 5}</action_call></response>'
DAY = 86400.0


async def _kept(bot: Bot, visitor: str) -> dict[str, Any]:
    """What the bot keeps of ``visitor``'s conversation."""
    agent = bot.agent
    cid = agent.context_id(web_chat, visitor)
    state = await agent.load_state(web_chat, visitor)
    assert agent.provided(HISTORY) is not None
    return {
        "working": len(state.working_memory.logs),
        "history": len(await agent.provided(HISTORY).search(cid)),
        "settings": await agent.memory.get(f"settings:{cid}"),
        "reminders": len(await schedules_of(agent).by_conversation(cid)),
    }


async def test_an_idle_web_visitor_is_forgotten_with_their_conversation(start_bot: StartBot) -> None:
    model = ScriptedModel([SET, answer(ANSWER)], repeat_last=True)
    bot = await start_bot(model, web={"visitor_idle_days": 2, "visitor_tier": "member", "schedules": True})
    visits = bot.web.visitors
    assert isinstance(visits.book, LocalVisitorBook) and visits.book.path == bot.settings.bot.data_dir / VISITORS_FILE
    async with client() as gone, client() as staying:
        await talk(bot.chat_url, gone, "ping me every 5 minutes", until=ANSWER)
        await until(lambda: saved(bot, gone, ANSWER))
        async with gone.get(bot.chat_url) as page:
            csrf = csrf_of(await page.text())
            assert page.cookies["visitor"]["max-age"] == str(int(2 * DAY))  # renewed at each visit
        headers = {"X-CSRF-Token": csrf}
        async with gone.post(bot.chat_url + "chat/send", json={"text": "/language fr"}, headers=headers) as r:
            assert r.status == 200
        visitor = visitor_of(gone)
        before = await _kept(bot, visitor)
        assert before["working"] and before["history"] and before["settings"] and before["reminders"] == 1

        visits.clock = lambda: time.time() + 1.5 * DAY
        async with staying.get(bot.chat_url) as page:  # another visitor, a day and a half later
            assert page.status == 200
        assert await visits.sweep() == []  # nobody idle two days yet

        visits.clock = lambda: time.time() + 2.5 * DAY
        assert await visits.sweep() == [visitor]  # (the other visited a day ago)
        assert await _kept(bot, visitor) == {"working": 0, "history": 0, "settings": None, "reminders": 0}
        assert await visits.sweep() == []  # each one once

        visits.clock = lambda: time.time() + 4 * DAY
        assert await visits.sweep() == [visitor_of(staying)]


async def test_web_visitor_idle_days_zero_keeps_visitors_forever(start_bot: StartBot) -> None:
    bot = await start_bot(ScriptedModel([answer(ANSWER)], repeat_last=True), web={"visitor_idle_days": 0})
    async with client() as visitor:
        await talk(bot.chat_url, visitor, "hello", until=ANSWER)
        async with visitor.get(bot.chat_url) as page:
            assert int(page.cookies["visitor"]["max-age"]) == 365 * 86400
    bot.web.visitors.clock = lambda: time.time() + 3650 * DAY
    assert await bot.web.visitors.sweep() == []


async def test_the_visits_survive_a_restart(tmp_path: Any) -> None:
    path = tmp_path / VISITORS_FILE
    book = LocalVisitorBook(path)
    await book.seen("ada", at=1000.0)
    await book.seen("bob", at=5000.0)
    await book.seen("ada", at=2000.0)
    await book.close()
    again = LocalVisitorBook(path)
    try:
        assert await again.idle(before=3000.0, limit=10) == ["ada"]
        assert await again.idle(before=3000.0, limit=10) == []
        assert await again.idle(before=9000.0, limit=10) == ["bob"]
    finally:
        await again.close()
