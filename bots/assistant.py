"""The default assistant: a persona and a few useful actions that work in every chat."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from core import ActionContext, Bot, Extension, Host, action, extension
from core.facts import recall, remember
from core.memory.history import excerpt, query_words

from .reminders import ReminderRules, reminder_actions

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ("assistant", "assistant_extension", "persona_text", "search_history")


class TimeArgs(BaseModel):
    """Arguments of ``current_time``."""

    timezone: str = Field(default="", description="IANA time zone, for example Europe/Paris; empty: the chat's")


class SearchArgs(BaseModel):
    """Arguments of ``search_history``."""

    words: str = Field(
        default="", max_length=200, description="Words the messages contain (all of them); empty: any message"
    )
    since: str = Field(default="", description="Earliest date, YYYY-MM-DD or an ISO date-time in UTC; empty: no limit")
    until: str = Field(default="", description="Latest date (inclusive), YYYY-MM-DD or ISO date-time; empty: no limit")
    limit: int = Field(default=5, ge=1, le=20, description="Messages to return at most, newest first")


def _ms(text: str, *, end: bool, name: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        if len(text) == 10:  # a whole day
            day = datetime.fromisoformat(text).date()
            moment = datetime.combine(day + timedelta(days=1) if end else day, time(), tzinfo=UTC)
            return int(moment.timestamp() * 1000) - (1 if end else 0)
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{name}={text!r} is not a date: write YYYY-MM-DD or 2024-05-01T14:00") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


async def _search_history(args: SearchArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    history = agent.history
    if history is None:
        raise ValueError("this bot keeps no history to search")
    since = _ms(args.since, end=False, name="since")
    until = _ms(args.until, end=True, name="until")
    found = await history.search(ctx.state.id, words=args.words, since=since, until=until, limit=args.limit)
    words = query_words(args.words)
    messages = [
        {
            "who": entry.who,
            "when": datetime.fromtimestamp(entry.ts / 1000, tz=UTC).isoformat(timespec="minutes"),
            "text": excerpt(entry.text, words),
        }
        for entry in reversed(found)
    ]
    return {"found": len(messages), "messages": messages}


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


current_time = action(
    name="current_time",
    description="The current date and time (in the chat's time zone unless another is given).",
    instructions="Use it when the user asks about the date, the time or the day of the week.",
    schema=TimeArgs,
    handler=_current_time,
)


search_history = action(
    name="search_history",
    description="Finds past messages of this conversation, also those too old to be shown to you, by words and "
    "dates; returns short excerpts with who wrote them and when.",
    instructions="Use it when the user refers to something said earlier that you do not see, or asks what was "
    "said at some time. Search with a few distinctive words.",
    schema=SearchArgs,
    handler=_search_history,
    examples=('<action_call name="search_history">{"words": "birthday party", "since": "2024-05-01"}</action_call>',),
)


def persona_text(name: str, template: str) -> str:
    """The persona with ``{name}`` filled in."""
    return template.replace("{name}", name)


def assistant_extension(*, search: bool = True, reminders: ReminderRules | None = None) -> Extension:
    """The default assistant's actions (``search_history`` too if ``search``: the bot keeps history), with
    ``set_reminder``, ``list_reminders`` and ``cancel_reminder`` within ``reminders`` (``bots.reminders``; they
    answer "this bot keeps no reminders" in an agent without schedules)."""
    actions = [remember, recall, current_time, *([search_history] if search else []), *reminder_actions(reminders)]
    return extension(name="assistant", actions=actions)


def assistant(settings: Settings) -> Bot:
    """The built-in assistant, the default APP of ``bots run``: a persona (``BOT_NAME``, ``BOT_PERSONA``), facts
    it remembers, the time, reminders, and every built-in feature (``bots.plugins.standard``) from the settings.
    It brings no context of its own: each platform's conversation is used as it is."""
    from . import plugins

    bot = settings.bot
    rules = ReminderRules(
        per_user=bot.schedules_per_user,
        per_chat=bot.schedules_per_chat,
        min_interval=bot.schedules_min_interval,
        web=settings.web.schedules,
    )
    return Bot(
        name="assistant",
        persona=bot.persona,
        extensions=[assistant_extension(search=False, reminders=rules)],
        plugins=plugins.standard(),
    )
