"""By default a web visitor cannot set a reminder (issue 35): it would fire with no page open, for any number of
new visitors; ``WEB_SCHEDULES=true`` allows them. Through the real web chat server and a scripted model."""

from __future__ import annotations

from core import ScriptedModel
from core.schedules import schedules_of
from extensions.web import web_chat

from .conftest import Bot, StartBot, answer, client, until
from .visiting import saved, talk, visitor_of

ANSWER = "About that reminder."
SET = '<response><action_call name="set_reminder">{"text": "ping me", "every_minutes": 5}</action_call></response>'


def set_then_answer() -> ScriptedModel:
    return ScriptedModel([SET, answer(ANSWER)], repeat_last=True)


async def _reminders(bot: Bot, visitor: str) -> int:
    cid = bot.agent.context_id(web_chat, visitor)
    return len(await schedules_of(bot.agent).by_conversation(cid))


async def test_a_web_visitor_is_refused_a_schedule_by_default(start_bot: StartBot) -> None:
    model = set_then_answer()
    bot = await start_bot(model, web={"visitor_tier": "member"})  # (a guest is not even offered set_reminder)
    async with client() as session:
        await talk(bot.chat_url, session, "ping me every 5 minutes", until=ANSWER)
        await until(lambda: saved(bot, session, ANSWER))
        assert await _reminders(bot, visitor_of(session)) == 0
    assert "set_reminder" in model.requests[0].action_names
    told = model.requests[1].prompt
    assert "no reminder was set" in told and "WEB_SCHEDULES=true" in told


async def test_a_guest_web_visitor_is_not_offered_set_reminder(start_bot: StartBot) -> None:
    model = set_then_answer()
    bot = await start_bot(model)
    async with client() as session:
        await talk(bot.chat_url, session, "ping me every 5 minutes", until=ANSWER)
        await until(lambda: saved(bot, session, ANSWER))
        assert await _reminders(bot, visitor_of(session)) == 0
    assert "set_reminder" not in model.requests[0].action_names


async def test_web_schedules_true_lets_a_visitor_set_one(start_bot: StartBot) -> None:
    model = set_then_answer()
    bot = await start_bot(model, web={"visitor_tier": "member", "schedules": True})
    async with client() as session:
        await talk(bot.chat_url, session, "ping me every 5 minutes", until=ANSWER)
        await until(lambda: saved(bot, session, ANSWER))
        assert await _reminders(bot, visitor_of(session)) == 1
