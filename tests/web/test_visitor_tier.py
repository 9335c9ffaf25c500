"""Web visitors are strangers (issue 35): their messages carry the ``guest`` tier unless ``WEB_VISITOR_TIER`` raises
it, so an action above it never runs for them; through the real web chat server and a scripted model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from core import ContextState, ScriptedModel
from core.trust import Tier
from extensions.chat.trust import TrustRules
from extensions.web import visitor_tier, web_chat

from .conftest import Bot, StartBot, answer, client, csrf_of, until

ANSWER = "Noted what I could."
REMEMBER = '<response><action_call name="remember">{"fact": "the locker code is 4711"}</action_call></response>'


def remember_then_answer() -> ScriptedModel:
    """Calls ``remember`` (offered or not), then answers."""
    return ScriptedModel([REMEMBER, answer(ANSWER)], repeat_last=True)


async def _talk(bot: Bot, session: aiohttp.ClientSession, text: str) -> list[dict[str, Any]]:
    """Send ``text`` from the page and return what the page is shown until the answer is posted."""
    async with session.get(bot.chat_url) as response:
        csrf = csrf_of(await response.text())
    shown: list[dict[str, Any]] = []
    async with session.get(bot.chat_url + "chat/events") as events:
        await events.content.readuntil(b'"ready"}\n\n')
        async with session.post(
            bot.chat_url + "chat/send", json={"text": text}, headers={"X-CSRF-Token": csrf}
        ) as response:
            assert response.status == 202, await response.text()
        async with asyncio.timeout(10):
            while not any(e.get("op") == "post" and e.get("text") == ANSWER for e in shown):
                line = await events.content.readline()
                if line.startswith(b"data: "):
                    shown.append(json.loads(line[6:]))
    return shown


async def _state(bot: Bot, session: aiohttp.ClientSession) -> ContextState:
    cookie = next(c for c in session.cookie_jar if c.key == "visitor")
    return await bot.agent.load_state(web_chat, cookie.value.partition(".")[0])


async def _facts(bot: Bot, session: aiohttp.ClientSession) -> list[str]:
    memory = (await _state(bot, session)).memory
    return list(memory.get("facts", [])) if isinstance(memory, dict) else []


async def _saved(bot: Bot, session: aiohttp.ClientSession) -> bool:
    """The run ended and saved its state (its answer is in the working memory)."""
    return ANSWER in str((await _state(bot, session)).working_memory.logs)


async def test_a_web_visitor_is_a_guest_refused_a_member_action(start_bot: StartBot) -> None:
    model = remember_then_answer()
    bot = await start_bot(model, actions={"policy": "remember=member"})
    async with client() as visitor:
        shown = await _talk(bot, visitor, "remember my locker code 4711")
        await until(lambda: _saved(bot, visitor))
        assert await _facts(bot, visitor) == []
    notices = [e["text"] for e in shown if e.get("op") in ("notice", "post") and e.get("text") != ANSWER]
    assert len(notices) == 1 and "⛔" in notices[0] and "remember" in notices[0] and "guest" in notices[0], shown
    first = model.requests[0]
    assert 'tier="guest"' in first.prompt
    assert "remember" not in first.action_names  # not offered to a guest
    assert "was not run" in model.requests[1].prompt and "guest" in model.requests[1].prompt


async def test_web_visitor_tier_member_lets_them_call_member_actions(start_bot: StartBot) -> None:
    model = remember_then_answer()
    bot = await start_bot(model, actions={"policy": "remember=member"}, web={"visitor_tier": "member"})
    async with client() as visitor:
        shown = await _talk(bot, visitor, "remember my locker code 4711")
        assert not any("⛔" in str(e.get("text")) for e in shown)
        await until(lambda: _kept(bot, visitor))  # (saved as the run ends, after the answer is posted)
    assert 'tier="member"' in model.requests[0].prompt


def test_a_visitor_the_operator_names_keeps_their_tier() -> None:
    rules = TrustRules(owners=frozenset({"web:boss"}), member_users=frozenset({"web:friend", "telegram:1"}))
    assert visitor_tier(rules, "boss", default=Tier.GUEST) is Tier.OWNER
    assert visitor_tier(rules, "friend", default=Tier.GUEST) is Tier.MEMBER
    assert visitor_tier(rules, "stranger", default=Tier.GUEST) is Tier.GUEST
    assert visitor_tier(rules, "stranger", default=Tier.MEMBER) is Tier.MEMBER
    assert web_chat.type == "web:chat"


async def _kept(bot: Bot, session: aiohttp.ClientSession) -> bool:
    return await _facts(bot, session) == ["the locker code is 4711"]
