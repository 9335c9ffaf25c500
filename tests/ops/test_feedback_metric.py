"""Reactions on the bot's answers (``core.usage.feedback``) land in ``bots_feedback_total`` by platform and score."""

from __future__ import annotations

from bots.ops import Ops
from core.usage.feedback import Score, record_feedback, score_of

from .support import make_agent, sample


def test_scores_of_emoji() -> None:
    assert score_of("👍") is Score.UP and score_of("👍🏿") is Score.UP and score_of("❤️") is Score.UP
    assert score_of("👎") is Score.DOWN and score_of("🤡") is Score.DOWN
    assert score_of("🍕") is None and score_of("") is None


async def test_a_reaction_is_counted_by_platform_and_score() -> None:
    agent = make_agent()
    Ops().attach(agent)
    down = sample("bots_feedback_total", {"platform": "telegram", "score": "down"})
    up = sample("bots_feedback_total", {"platform": "telegram", "score": "up"})
    for emoji in ("👎", "🍕"):  # (a pizza says nothing: not counted)
        await record_feedback(agent, context_id="telegram:chat:5", user="telegram:5", message="9", emoji=emoji)
    assert sample("bots_feedback_total", {"platform": "telegram", "score": "down"}) == down + 1
    assert sample("bots_feedback_total", {"platform": "telegram", "score": "up"}) == up
