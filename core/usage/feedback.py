"""Feedback on the bot's answers: a reaction (a thumbs up or down) that a person puts on one of the bot's own
messages, recorded against that answer, never taken as a new message to answer.

A reaction is counted twice: as a metric (``agent.observe("feedback:up" | "feedback:down", context_id)``) and in the
usage counters, beside the tokens, under ``feedback:<score>:chat:<context id>`` and
``feedback:<score>:user:<platform>:<id>`` (who reacted). As with pictures (``core.media.pictures``), a feedback
counter keeps its count in ``output_tokens``. A reaction is counted once, whatever the platform delivers again
(the charge id names the message, the person and the emoji); taking a reaction back does not uncount it.
"""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING

from . import USAGE, day_of

if TYPE_CHECKING:
    from ..definition_types import Host

__all__ = ("Score", "feedback_keys", "record_feedback", "score_of")

log = logging.getLogger("core.usage")


class Score(enum.StrEnum):
    """What a reaction says of the answer."""

    UP = "up"
    """Good (👍, ❤, 🔥, 🎉, 👏, ...)."""
    DOWN = "down"
    """Bad (👎, 💩, 🤮, 😡, ...)."""


_UP = frozenset(
    ["👍", "❤", "❤️", "🔥", "🎉", "👏", "🥰", "😍", "💯", "🏆", "🙏", "👌", "⚡", "🤩", "🆒", "✅", "💘", "😁"]
)
_DOWN = frozenset(["👎", "💩", "🤮", "😡", "🤬", "😢", "😭", "🤡", "🥱", "🙈", "❌", "💔", "😐", "🤨", "🖕"])


def score_of(emoji: str) -> Score | None:
    """The score ``emoji`` gives an answer (``None``: an emoji that says neither, not counted)."""
    if emoji in _UP:
        return Score.UP
    if emoji in _DOWN:
        return Score.DOWN
    stripped = emoji.replace("\ufe0f", "")  # variation selectors, and skin tones on the thumbs
    stripped = "".join(ch for ch in stripped if not 0x1F3FB <= ord(ch) <= 0x1F3FF)
    if stripped != emoji:
        return score_of(stripped)
    return None


def feedback_keys(score: Score, context_id: str, user: str | None) -> list[str]:
    """The usage keys a reaction is counted under."""
    keys = [f"feedback:{score.value}:chat:{context_id}"]
    if user is not None:
        keys.append(f"feedback:{score.value}:user:{user}")
    return keys


async def record_feedback(agent: Host, *, context_id: str, user: str | None, message: str, emoji: str) -> Score | None:
    """Record ``user``'s reaction ``emoji`` on the bot's answer ``message`` (a platform message id) in the
    conversation ``context_id``; returns its score, ``None`` when the emoji is not counted. A failing store is
    logged: a reaction is never worth an error."""
    score = score_of(emoji)
    if score is None:
        return None
    agent.observe(f"feedback:{score.value}", context_id)
    usage = agent.provided(USAGE)  # (the Usage plugin's store; without it nothing keeps the score)
    if usage is None:
        return score
    try:
        await usage.add(
            day=day_of(),
            keys=feedback_keys(score, context_id, user),
            input_tokens=0,
            output_tokens=1,
            cost=0,
            charge=f"feedback:{context_id}:{message}:{user}:{emoji}",
        )
    except Exception:
        log.exception("could not record a reaction in %s", context_id)
    return score
