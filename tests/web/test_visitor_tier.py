"""Web visitors are strangers (issue 35): their messages carry the ``guest`` tier unless ``WEB_VISITOR_TIER`` raises
it, so an action above it never runs for them; through the real web chat server and a scripted model."""

from __future__ import annotations

import aiohttp

from core import ScriptedModel
from core.trust import Tier
from extensions.chat.trust import TrustRules
from extensions.web import visitor_tier

from .conftest import Bot, StartBot, answer, client, until
from .visiting import saved, state_of, talk

ANSWER = "Noted what I could."
REMEMBER = '<response><action_call name="remember">{"fact": "the locker code is 4711"}</action_call></response>'


def remember_then_answer() -> ScriptedModel:
    """Calls ``remember`` (offered or not), then answers."""
    return ScriptedModel([REMEMBER, answer(ANSWER)], repeat_last=True)


async def _facts(bot: Bot, session: aiohttp.ClientSession) -> list[str]:
    memory = (await state_of(bot, session)).memory
    return list(memory.get("facts", [])) if isinstance(memory, dict) else []


async def test_a_web_visitor_is_a_guest_refused_a_member_action(start_bot: StartBot) -> None:
    model = remember_then_answer()
    bot = await start_bot(model, actions={"policy": "remember=member"})
    async with client() as visitor:
        shown = await talk(bot, visitor, "remember my locker code 4711", until=ANSWER)
        await until(lambda: saved(bot, visitor, ANSWER))
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
        shown = await talk(bot, visitor, "remember my locker code 4711", until=ANSWER)
        assert not any("⛔" in str(e.get("text")) for e in shown)
        await until(lambda: _kept(bot, visitor))  # (saved as the run ends, after the answer is posted)
    assert 'tier="member"' in model.requests[0].prompt


def test_a_visitor_the_operator_names_keeps_their_tier() -> None:
    rules = TrustRules(owners=frozenset({"web:boss"}), member_users=frozenset({"web:friend", "telegram:1"}))
    assert visitor_tier(rules, "boss", default=Tier.GUEST) is Tier.OWNER
    assert visitor_tier(rules, "friend", default=Tier.GUEST) is Tier.MEMBER
    assert visitor_tier(rules, "stranger", default=Tier.GUEST) is Tier.GUEST
    assert visitor_tier(rules, "stranger", default=Tier.MEMBER) is Tier.MEMBER


async def _kept(bot: Bot, session: aiohttp.ClientSession) -> bool:
    return await _facts(bot, session) == ["the locker code is 4711"]
