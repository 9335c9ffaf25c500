"""The default assistant: a persona and a few useful actions that work in every chat."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from core import ActionContext, Bot, Extension, Host, action, extension
from core.facts import forget, recall, remember
from extensions.web.settings import WebSettings

from . import plugins
from .calculator import calculate
from .history_search import search_history
from .reminders import ReminderRules, reminder_actions

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ("assistant", "assistant_extension", "persona_text")


class TimeArgs(BaseModel):
    """Arguments of ``current_time``."""

    timezone: str = Field(default="", description="IANA time zone, for example Europe/Paris; empty: the chat's")


def _current_time(args: TimeArgs, ctx: ActionContext, agent: Host) -> dict[str, str]:
    name = args.timezone.strip() or agent.chat_policy.zone_of(ctx.state.chat)
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown time zone {name[:64]!r}; use an IANA name like Europe/Paris") from exc
    now = datetime.now(zone)
    return {
        "iso": now.isoformat(timespec="seconds"),
        "weekday": now.strftime("%A"),
        "timezone": name,
    }


def _time_text(result: dict[str, str]) -> str:
    """The time as the model reads it: a sentence it can say ("It is 19:53 on Tuesday 1 December 2026 in
    Asia/Tokyo."). Shown ``iso: 2026-12-01T19:53:09+09:00, weekday: ...``, the embedded model refused twice, and the
    form itself was the answer."""
    now = datetime.fromisoformat(result["iso"])
    return f"It is {now:%H:%M} on {now:%A} {now.day} {now:%B %Y} in {result['timezone']}."


current_time = action(
    name="current_time",
    description="The current date and time (in the chat's time zone unless another is given).",
    instructions="Use it when the user asks about the date, the time or the day of the week.",
    schema=TimeArgs,
    handler=_current_time,
    format=_time_text,
)


def persona_text(name: str, template: str) -> str:
    """The persona with ``{name}`` filled in."""
    return template.replace("{name}", name)


def assistant_extension(*, search: bool = True, reminders: ReminderRules | None = None) -> Extension:
    """The default assistant's actions (``calculate`` for arithmetic; ``search_history`` too if ``search``: the bot
    keeps history), with ``set_reminder``, ``list_reminders`` and ``cancel_reminder`` within ``reminders``
    (``bots.reminders``; they answer "this bot keeps no reminders" in an agent without schedules)."""
    actions = [
        remember,
        recall,
        forget,
        current_time,
        calculate,
        *([search_history] if search else []),
        *reminder_actions(reminders),
    ]
    return extension(name="assistant", actions=actions)


def assistant(settings: Settings) -> Bot:
    """The built-in assistant, the default APP of ``bots run``: a persona (``BOT_NAME``, ``BOT_PERSONA``), facts
    it remembers, the time, reminders, and every built-in feature (``bots.plugins.standard``) from the settings.
    It brings no context of its own: each platform's conversation is used as it is."""
    bot = settings.bot
    rules = ReminderRules(
        per_user=bot.schedules_per_user,
        per_chat=bot.schedules_per_chat,
        min_interval=bot.schedules_min_interval,
        web=settings.group(WebSettings).schedules,
    )
    return Bot(
        name="assistant",
        persona=bot.persona,
        extensions=[assistant_extension(search=False, reminders=rules)],
        plugins=plugins.standard(),
    )
