"""The console shows the schedules: the next firings on the fleet page, a conversation's on its page (escaped)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.schedules import Schedule, schedules_of

from .conftest import StartBot, client, login, scripted


async def test_the_console_lists_the_next_firings_and_a_conversations_reminders(start_bot: StartBot) -> None:
    bot = await start_bot(scripted("ok"))
    schedules = schedules_of(bot.agent)
    soon = datetime.now(UTC) + timedelta(days=1)
    where = {"conversation": "telegram:chat:42", "context": "telegram:chat", "args": {"chat_id": 42}}
    await schedules.set(Schedule.once(at=soon, text="water <b>the</b> plants", creator="telegram:7", **where))
    await schedules.set(
        Schedule.once(at=soon + timedelta(hours=1), text="other chat", **{**where, "conversation": "x:1"})
    )
    async with client() as session:
        await login(session, bot)
        async with session.get(bot.console_url + "fleet") as response:
            html = await response.text()
        assert "Next schedule firings" in html
        assert "water &lt;b&gt;the&lt;/b&gt; plants" in html and "<b>the</b>" not in html
        assert html.index("water") < html.index("other chat")  # soonest first
        async with session.get(bot.console_url + "conversation", params={"cid": "telegram:chat:42"}) as response:
            html = await response.text()
        assert "Reminders and schedules" in html and "telegram:7: water &lt;b&gt;the&lt;/b&gt; plants" in html
        assert "other chat" not in html
