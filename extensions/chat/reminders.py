"""``/reminders`` in every chat, written once: the conversation's reminders and scheduled messages
(``core.schedules``), soonest first, each with a button to cancel it (Telegram's inline keyboard, Discord's
buttons; ``/reminders cancel <id>`` too). Whoever set a reminder may cancel it; so may the
chat's admins and ``BOT_ADMIN_USERS``, for anyone's in their chat.

And what happens when the platform says the bot may no longer post in a conversation (``ChatGoneError``: it
was removed, blocked or lost access): the conversation's schedules are dropped, counted as ``schedule_dropped``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.errors import ConfigError
from core.schedules import Schedule, ScheduleKind, check_zone, schedules_of

from .i18n import say

if TYPE_CHECKING:
    from core import Host
    from core.schedules import Schedules

__all__ = (
    "CANCEL_PREFIX",
    "SHOWN",
    "describe",
    "drop_conversation",
    "find",
    "schedules_or_none",
    "short_id",
)

log = logging.getLogger("extensions.chat")

CANCEL_PREFIX = "reminders:cancel:"
"""The value of a cancel button (``reminders:cancel:<schedule id>``)."""
SHOWN = 10
"""Reminders listed (and offered a button) at most."""


def schedules_or_none(agent: Host) -> Schedules | None:
    """The agent's schedules, or None when it keeps none (an agent built without them)."""
    try:
        return schedules_of(agent)
    except ConfigError:
        return None


def short_id(schedule: Schedule) -> str:
    """The id people read and type (its first 6 hex digits; ``find`` takes any unique prefix)."""
    return schedule.id[:6]


def _every(seconds: float, lang: str | None) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            return say(f"reminders.every_{unit}", lang, n=int(seconds // size))
    return say("reminders.every_second", lang, n=f"{seconds:g}")


def describe(schedule: Schedule, *, lang: str | None, quote: Callable[[str], str] = str) -> str:
    """One line: its id, when it fires next (in its own time zone), how it repeats, who set it, its text (through
    ``quote``: see ``ChatCommands.quote``)."""
    when = "-"
    if schedule.next_fire_at is not None:
        local = schedule.next_fire_at.astimezone(check_zone(schedule.tz))
        when = f"{local:%Y-%m-%d %H:%M} {schedule.tz}"
    if schedule.cron is not None:
        repeat = say("reminders.cron", lang, cron=schedule.cron)
    elif schedule.every is not None:
        repeat = _every(schedule.every, lang)
    else:
        repeat = say("reminders.once", lang)
    text = " ".join(schedule.text.split())
    if len(text) > 80:
        text = text[:79] + "…"
    kind = say("reminders.text", lang) if schedule.kind is ScheduleKind.TEXT else ""
    setter = schedule.creator or say("reminders.operator", lang)
    return f"{short_id(schedule)} · {when} · {repeat} · {setter}: {kind}{quote(text)}"


def find(found: list[Schedule], ident: str) -> Schedule | None:
    """The schedule of ``found`` whose id is ``ident`` or starts with it (at least 4 characters), when only one
    does."""
    ident = ident.strip().lower().removeprefix("#")
    exact = [s for s in found if s.id == ident]
    if exact:
        return exact[0]
    if len(ident) < 4:
        return None
    matches = [s for s in found if s.id.startswith(ident)]
    return matches[0] if len(matches) == 1 else None


async def drop_conversation(agent: Host, context_id: str, reason: str) -> int:
    """The platform said the bot may no longer post in ``context_id`` (``reason``): cancel its schedules, each
    counted as ``schedule_dropped``; how many. A store that fails is logged (the next firing tries again)."""
    schedules = schedules_or_none(agent)
    if schedules is None:
        return 0
    try:
        found = await schedules.by_conversation(context_id)
        dropped = 0
        for schedule in found:
            if await schedules.cancel(schedule.id) is not None:
                dropped += 1
                agent.observe("schedule_dropped", context_id, 1.0)
    except Exception as exc:
        log.warning("could not drop the schedules of %s (%s): %s", context_id, reason, exc)
        return 0
    if dropped:
        log.warning("%s: dropped %d schedule(s): %s", context_id, dropped, reason)
    return dropped
