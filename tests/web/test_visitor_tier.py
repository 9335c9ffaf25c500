"""Web visitors are strangers (issue 35): their messages carry the ``guest`` tier unless ``WEB_VISITOR_TIER`` raises
it, so an action above it never runs for them; through the real web chat server and a scripted model."""

from __future__ import annotations

import re

from core import ScriptedModel
from core.trust import Tier
from extensions.chat.trust import TrustRules
from extensions.web import visitor_tier

from .conftest import StartBot, answer, client, until
from .visiting import saved, talk

ANSWER = "Noted what I could."
REMEMBER = '<response><action_call name="remember">{"fact": "the locker code is 4711"}</action_call></response>'


def remember_then_answer() -> ScriptedModel:
    """Calls ``remember`` (offered or not), then answers."""
    return ScriptedModel([REMEMBER, answer(ANSWER)], repeat_last=True)


def _remember_result(prompt: str) -> str:
    """What the model read of its ``remember`` call: the result's body, an ``<error>`` when it did not run."""
    found = re.search(r'<action_result name="remember"[^>]*>(.*?)</action_result>', prompt, re.S)
    assert found is not None, prompt[-2000:]
    return found.group(1)


async def test_a_web_visitor_is_a_guest_refused_a_member_action(start_bot: StartBot) -> None:
    model = remember_then_answer()
    bot = await start_bot(model, actions={"policy": "remember=member"})
    async with client() as visitor:
        shown = await talk(bot.chat_url, visitor, "remember my locker code 4711", until=ANSWER)
        await until(lambda: saved(bot, visitor, ANSWER))
    notices = [e["text"] for e in shown if e.get("op") in ("notice", "post") and e.get("text") != ANSWER]
    assert len(notices) == 1 and "⛔" in notices[0] and "remember" in notices[0] and "guest" in notices[0], shown
    first = model.requests[0]
    assert "tier=" not in first.prompt  # (the tier every visitor has goes without saying; the refusal says it)
    assert "remember" not in first.action_names  # not offered to a guest
    told = _remember_result(model.requests[1].prompt)
    assert told.startswith("<error>") and "was not run" in told and "guest" in told


async def test_web_visitor_tier_member_lets_them_call_member_actions(start_bot: StartBot) -> None:
    model = remember_then_answer()
    bot = await start_bot(model, actions={"policy": "remember=member"}, web={"visitor_tier": "member"})
    async with client() as visitor:
        shown = await talk(bot.chat_url, visitor, "remember my locker code 4711", until=ANSWER)
        assert not any("⛔" in str(e.get("text")) for e in shown)
    assert "tier=" not in model.requests[0].prompt and "remember" in model.requests[0].action_names
    assert not _remember_result(model.requests[1].prompt).startswith("<error>")  # it ran


def test_a_visitor_the_operator_names_keeps_their_tier() -> None:
    rules = TrustRules(owners=frozenset({"web:boss"}), member_users=frozenset({"web:friend", "telegram:1"}))
    assert visitor_tier(rules, "boss", default=Tier.GUEST) is Tier.OWNER
    assert visitor_tier(rules, "friend", default=Tier.GUEST) is Tier.MEMBER
    assert visitor_tier(rules, "stranger", default=Tier.GUEST) is Tier.GUEST
    assert visitor_tier(rules, "stranger", default=Tier.MEMBER) is Tier.MEMBER
