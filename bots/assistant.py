"""The default assistant: a persona and a few useful actions that work in every chat."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from core import ActionContext, Agent, Extension, action, extension

__all__ = ("assistant_extension", "persona_text")

MAX_FACTS = 50


class RememberArgs(BaseModel):
    """Arguments of ``remember``."""

    fact: str = Field(min_length=1, max_length=500, description="The fact to keep, in one sentence")


class TimeArgs(BaseModel):
    """Arguments of ``current_time``."""

    timezone: str = Field(default="UTC", description="IANA time zone, for example Europe/Paris")


def _facts(ctx: ActionContext) -> list[str]:
    memory = ctx.state.memory
    if not isinstance(memory, dict):
        raise TypeError("this context's memory is not a dict")
    facts = memory.setdefault("facts", [])
    assert isinstance(facts, list)
    return facts


def _remember(args: RememberArgs, ctx: ActionContext, agent: Agent) -> dict[str, Any]:
    facts = _facts(ctx)
    fact = args.fact.strip()
    if fact not in facts:
        facts.append(fact)
    del facts[:-MAX_FACTS]
    return {"remembered": fact, "facts": len(facts)}


def _recall(args: dict[str, Any], ctx: ActionContext, agent: Agent) -> dict[str, Any]:
    return {"facts": list(_facts(ctx))}


def _current_time(args: TimeArgs, ctx: ActionContext, agent: Agent) -> dict[str, str]:
    try:
        zone = ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {args.timezone!r}; use an IANA name like Europe/Paris") from exc
    now = datetime.now(zone)
    return {
        "iso": now.isoformat(timespec="seconds"),
        "weekday": now.strftime("%A"),
        "timezone": args.timezone,
    }


remember = action(
    name="remember",
    description="Keeps a fact about this conversation (a name, a preference) for later conversations.",
    instructions="Use it when the user tells you something worth remembering or asks you to remember.",
    schema=RememberArgs,
    handler=_remember,
    examples=('<action_call name="remember">{"fact": "The user\'s name is Ada"}</action_call>',),
)
recall = action(
    name="recall",
    description="Lists the facts kept about this conversation.",
    schema=dict[str, Any],
    handler=_recall,
)
current_time = action(
    name="current_time",
    description="The current date and time.",
    instructions="Use it when the user asks about the date, the time or the day of the week.",
    schema=TimeArgs,
    handler=_current_time,
)


def persona_text(name: str, template: str) -> str:
    """The persona with ``{name}`` filled in."""
    return template.replace("{name}", name)


def assistant_extension() -> Extension:
    """The default assistant's actions."""
    return extension(name="assistant", actions=[remember, recall, current_time])
