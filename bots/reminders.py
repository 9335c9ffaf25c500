"""The default assistant's reminders: actions to set one (once at a time, in so many minutes, or recurring on a
cron expression or an interval, in the chat's time zone), list and cancel them (``core.schedules`` keeps and
fires them), within the operator's limits (``BOT_SCHEDULES_PER_USER``, ``BOT_SCHEDULES_PER_CHAT``,
``BOT_SCHEDULES_MIN_INTERVAL``).

A reminder belongs to the conversation it was asked in and to the person who asked (the latest input's author:
their per-user limits count it, and its firings count to their usage and limits); it acts with that person's
trust tier. Whoever set one may cancel it; so may the chat's admins and ``BOT_ADMIN_USERS``.

In the web chat, where anyone who reaches the page is a new visitor, no reminder is set unless the operator allows
it (``WEB_SCHEDULES``): a reminder fires with no page open, so each visitor could start model calls that never stop.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from core import Action, ActionContext, Host, action
from core.entries import InputRef
from core.errors import ActionError, ConfigError, ValidationError
from core.schedules import Schedule, ScheduleKind, Schedules, check_cron, check_zone, next_after, schedules_of
from core.trust import TIER_PARAM, Tier, tier_of
from core.usage import user_of
from extensions.chat.reminders import describe, find, short_id
from extensions.web import web_chat

__all__ = ("ReminderRules", "reminder_actions")


@dataclass(frozen=True, kw_only=True)
class ReminderRules:
    """The operator's limits on reminders set from the chat."""

    per_user: int = 10
    """Active reminders one user may have (0: no limit; ``BOT_SCHEDULES_PER_USER``)."""
    per_chat: int = 25
    """Active reminders one chat may have (0: no limit; ``BOT_SCHEDULES_PER_CHAT``)."""
    min_interval: float = 300.0
    """Seconds between two occurrences of a recurring reminder at least (``BOT_SCHEDULES_MIN_INTERVAL``)."""
    web: bool = False
    """Reminders may be set in the web chat (``WEB_SCHEDULES``)."""


class SetReminderArgs(BaseModel):
    """Arguments of ``set_reminder``: the text, and one of ``at``, ``in_minutes``, ``in_seconds``, ``cron``,
    ``every_minutes``."""

    text: str = Field(
        min_length=1,
        max_length=1000,
        description="What to do at that time, as an instruction to yourself, e.g. 'remind them to water the plants'",
    )
    at: str = Field(
        default="", max_length=100, description="Once, at this date and time in the chat's time zone: YYYY-MM-DD HH:MM"
    )
    in_minutes: float = Field(default=0, ge=0, description="Or once, in this many minutes from now")
    in_seconds: float = Field(default=0, ge=0, description="Or once, in this many seconds from now")
    cron: str = Field(
        default="",
        max_length=100,
        description="Or recurring: a cron expression in the chat's time zone, '0 9 * * 1' = Mondays 9:00",
    )
    every_minutes: float = Field(default=0, ge=0, description="Or recurring: every this many minutes")
    as_written: bool = Field(
        default=False, description="true: post the text exactly as written then, instead of writing a message"
    )


class CancelReminderArgs(BaseModel):
    """Arguments of ``cancel_reminder``."""

    id: str = Field(min_length=1, max_length=32, description="The reminder's id, as list_reminders shows it")


def _schedules(agent: Host) -> Schedules:
    try:
        return schedules_of(agent)
    except ConfigError:
        raise ValueError("this bot keeps no reminders") from None


def _author(ctx: ActionContext) -> InputRef | None:
    """The latest input of the conversation with an author (who asked)."""
    for entry in reversed(ctx.state.working_memory.logs):
        if isinstance(entry, InputRef) and user_of(entry) is not None:
            return entry
    return None


def _local(when: datetime | None, tz: str) -> str:
    return "-" if when is None else when.astimezone(check_zone(tz)).strftime("%Y-%m-%d %H:%M")


def _closest_gap(cron: str, tz: str, now: datetime) -> float:
    """The shortest time between two of the next few occurrences of ``cron`` (seconds)."""
    times: list[datetime] = []
    after = now
    for _ in range(6):
        found = next_after(cron=cron, every=None, at=None, tz=tz, after=after)
        if found is None:
            break
        times.append(found)
        after = found
    return min(((b - a).total_seconds() for a, b in itertools.pairwise(times)), default=float("inf"))


_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hr": 3600, "hour": 3600}
_UNITS |= {"d": 86400, "day": 86400}
_AMOUNT_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "five": 5, "ten": 10, "fifteen": 15, "thirty": 30}
_FROM_NOW = re.compile(
    rf"\A(?:in\s+)?(?P<n>\d+(?:\.\d+)?|{'|'.join(_AMOUNT_WORDS)})\s*(?P<unit>{'|'.join(_UNITS)})s?"
    r"(?:\s+(?:from\s+now|later))?\Z",
    re.IGNORECASE,
)
"""``at`` written as a time from now, as people and models write it: "2 minutes from now", "in 2 minutes", "in an
hour", "90 s" (English). A small model given the choice of ``at`` and ``in_minutes`` wrote ``at: "2 minutes from
now"`` for "Remind me in 2 minutes to stretch.", twice, error and all."""


def _from_now(text: str) -> timedelta | None:
    found = _FROM_NOW.match(" ".join(text.split()))
    if found is None:
        return None
    amount = found["n"].lower()
    n = float(amount) if amount[0].isdigit() else _AMOUNT_WORDS[amount]
    return timedelta(seconds=n * _UNITS[found["unit"].lower()])


def _moment(at: str, tz: str, now: datetime) -> datetime | None:
    """The time ``at`` names: a time from now (``_from_now``), or a date and time (in ``tz`` unless it says its
    own zone); None when it is neither."""
    if (later := _from_now(at)) is not None:
        return now + later
    try:
        when = datetime.fromisoformat(at.strip())
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=check_zone(tz))


def _when(args: SetReminderArgs, *, tz: str, now: datetime, rules: ReminderRules) -> dict[str, Any]:
    """The timing fields of the schedule ``args`` ask for (``at``, or ``cron``, or ``every`` and ``at``)."""
    given = [
        name
        for name, value in (
            ("at", args.at.strip()),
            ("in_minutes", args.in_minutes),
            ("in_seconds", args.in_seconds),
            ("cron", args.cron.strip()),
            ("every_minutes", args.every_minutes),
        )
        if value
    ]
    moment = _moment(args.at, tz, now) if args.at.strip() else None
    ahead = moment is not None and moment > now
    if len(given) > 1 and "at" in given and {"in_minutes", "in_seconds"} & set(given) and not ahead:
        # (the embedded model wrote "at": "2023-04-15 14:00" beside "in_minutes": 1 for "Remind me in 1 minute
        # to stretch.": a time past, or none, beside a time from now is not what was meant)
        args = args.model_copy(update={"at": ""})
        given.remove("at")
    if len(given) != 1:
        raise ValueError("give exactly one of at, in_minutes, in_seconds, cron or every_minutes")
    if args.at.strip():
        if moment is None:
            raise ValueError(f"at={args.at!r} is not a date and time: write YYYY-MM-DD HH:MM")
        if not ahead:
            raise ValueError(
                f"{_local(moment, tz)} {tz} has passed (it is {_local(now, tz)} {tz}): choose a later time"
            )
        return {"at": moment, "next_fire_at": moment}
    if args.in_minutes or args.in_seconds:
        when = now + timedelta(minutes=args.in_minutes, seconds=args.in_seconds)
        return {"at": when, "next_fire_at": when}
    if args.cron.strip():
        expr = check_cron(args.cron)
        gap = _closest_gap(expr, tz, now)
        if gap < rules.min_interval:
            raise ValueError(
                f"{expr!r} repeats every {gap:g} seconds; a recurring reminder repeats at most every "
                f"{rules.min_interval:g} seconds here"
            )
        return {"cron": expr, "next_fire_at": next_after(cron=expr, every=None, at=None, tz=tz, after=now)}
    every = args.every_minutes * 60
    if every < rules.min_interval:
        raise ValueError(f"a recurring reminder repeats at most every {rules.min_interval / 60:g} minutes here")
    first = now + timedelta(seconds=every)
    return {"every": every, "at": first, "next_fire_at": first}


def _timed(args: SetReminderArgs, *, tz: str, now: datetime, rules: ReminderRules) -> dict[str, Any]:
    """``_when``, its refusals (a time past or unreadable, a bad cron) as the model's to answer, not a bug's
    traceback in the log."""
    try:
        return _when(args, tz=tz, now=now, rules=rules)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc


# What the model reads of the three results: sentences it can say ("Done: reminders: none, count: 0" was the
# embedded model's answer to "What reminders do I have?", twice refused, the form itself the answer).


def _set_text(result: dict[str, Any]) -> str:
    repeats = ", and then again as it repeats" if result.get("recurring") else ""
    return f"Reminder {result['id']} is set for {result['next']}{repeats}."


def _list_text(result: dict[str, Any]) -> str:
    """One sentence a reminder, its fields between commas ("One reminder is set in this chat: c02bc7, at
    2026-12-01 13:20 UTC, once, set by telegram:1: call the bank."): as ``describe`` writes them for people (``·``
    between fields), the embedded model read one reminder as two."""
    reminders, count = [str(r) for r in result.get("reminders") or ()], result.get("count", 0)
    if not count:
        return "No reminders are set in this chat."
    lines = []
    for line in reminders:
        ident, _, rest = line.partition(" · ")
        when, _, rest = rest.partition(" · ")
        repeat, _, rest = rest.partition(" · ")
        said = f"{ident}, at {when}, {repeat}, set by {rest}" if rest else line
        lines.append(said if said.endswith((".", "!", "?")) else f"{said}.")
    if count == 1:
        return f"One reminder is set in this chat: {lines[0]}"
    more = f" (the first {len(lines)})" if count > len(lines) else ""
    return f"{count} reminders are set in this chat{more}: " + " ".join(f"{n}) {s}" for n, s in enumerate(lines, 1))


def reminder_actions(rules: ReminderRules | None = None) -> list[Action[Any]]:
    """``set_reminder``, ``list_reminders`` and ``cancel_reminder`` within ``rules``."""
    limits = rules or ReminderRules()

    async def set_reminder(args: SetReminderArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
        if not limits.web and ctx.state.context.includes(web_chat):
            raise ActionError(
                "no reminder was set: reminders and scheduled messages cannot be set from the web chat here (the "
                "operator allows them with WEB_SCHEDULES=true); tell the person you cannot set one for them"
            )
        schedules = _schedules(agent)
        tz = agent.chat_policy.zone_of(ctx.state.chat)
        now = schedules.clock.now()
        author = _author(ctx)
        schedule = Schedule(
            text=args.text.strip(),
            kind=ScheduleKind.TEXT if args.as_written else ScheduleKind.PROMPT,
            creator=user_of(author) if author is not None else None,
            tier=author.params.get(TIER_PARAM) if author is not None else None,
            tz=tz,
            created_at=now,
            **_timed(args, tz=tz, now=now, rules=limits),
            **schedules.address(ctx.state.context, ctx.state.platform_args),
        )
        await schedules.set(schedule, per_conversation=limits.per_chat or None, per_creator=limits.per_user or None)
        return {
            "id": short_id(schedule),
            "next": f"{_local(schedule.next_fire_at, tz)} {tz}",
            "recurring": schedule.recurring,
        }

    async def list_reminders(args: dict[str, Any], ctx: ActionContext, agent: Host) -> dict[str, Any]:
        found = await _schedules(agent).by_conversation(ctx.state.id)
        return {"reminders": [describe(s, lang="en") for s in found[:20]], "count": len(found)}

    async def cancel_reminder(args: CancelReminderArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
        schedules = _schedules(agent)
        found = find(await schedules.by_conversation(ctx.state.id), args.id)
        if found is None:
            raise ValueError(f"there is no reminder {args.id!r} in this conversation; list_reminders shows them")
        author = _author(ctx)
        user = user_of(author) if author is not None else None
        admin = author is not None and tier_of(author, owners=agent.chat_policy.admin_users).at_least(Tier.ADMIN)
        if found.creator != user and not admin:  # the operator's (no creator) too: admins only
            raise ValidationError("only whoever set this reminder, or this chat's admins, may cancel it")
        await schedules.cancel(found.id)
        return {"cancelled": short_id(found)}

    return [
        action(
            name="set_reminder",
            description="Sets a reminder or scheduled message in this conversation: once (at a time, or in so many "
            "minutes or seconds) or recurring (a cron expression or every so many minutes), in the chat's time "
            "zone. At that time you are asked to write the message (or, with as_written, the text is posted).",
            instructions="Use it when someone asks to be reminded of something or for a message at a set time. "
            "Give exactly one of at, in_minutes, in_seconds, cron or every_minutes. Tell them the id and the time.",
            schema=SetReminderArgs,
            handler=set_reminder,
            format=_set_text,
            examples=(
                '<action_call name="set_reminder">{"text": "remind them to water the plants", "in_minutes": 30}'
                "</action_call>",
            ),
        ),
        action(
            name="list_reminders",
            description="Lists this conversation's reminders and scheduled messages: id, next time, how it "
            "repeats, who set it, text.",
            schema=dict[str, Any],
            handler=list_reminders,
            format=_list_text,
        ),
        action(
            name="cancel_reminder",
            description="Cancels one of this conversation's reminders by its id (its creator, or a chat admin).",
            schema=CancelReminderArgs,
            handler=cancel_reminder,
            format=lambda result: f"Reminder {result['cancelled']} is cancelled.",
        ),
    ]
