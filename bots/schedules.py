"""The operator's schedules (``BOT_SCHEDULES``): what an entry is, how the setting is read, how its schedules are
set at start, and their next firings (``bots.schedule_service`` wires them into the bot).

The operator's schedules (``BOT_SCHEDULES``) are messages set in the environment, not in a chat.

``BOT_SCHEDULES`` is a JSON list; each entry names a channel, when (a cron expression or ``every`` so many
seconds, in ``tz`` or ``BOT_TIMEZONE``) and what (a ``prompt`` the model answers in the conversation, or a
``text`` posted as written)::

    BOT_SCHEDULES='[{"channel": "telegram:-100123", "cron": "0 9 * * 1", "text": "Weekly stand-up in 5 minutes"},
                    {"channel": "discord:4567", "every": 86400, "prompt": "Post a fun fact about space"}]'

Each entry's schedule has an id computed from the entry (``op`` and 14 hex digits), so starting again, or
several processes of a fleet starting at once, set it once; an entry changed or removed from the list is
cancelled in its channel at the next start.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pydantic

from core.chat_settings import known_zone
from core.errors import ValidationError
from core.schedules import (
    Schedule,
    ScheduleKind,
    Schedules,
    check_cron,
    check_zone,
    next_after,
)
from extensions.platforms import operator_channel

from .setting_values import json_list

if TYPE_CHECKING:
    pass

__all__ = (
    "OPERATOR_PREFIX",
    "OperatorSchedule",
    "address_of_channel",
    "parse_operator_schedules",
    "seed_operator_schedules",
    "upcoming_lines",
)

log = logging.getLogger("bots.schedules")

OPERATOR_PREFIX = "op"
"""The ids of the operator's schedules start with this."""

MAX_EVERY = 366 * 86400.0
"""An entry's ``every`` at most, seconds (a year and a day; a longer one is a cron expression's job): beyond, the
next occurrence's date overflows."""


class OperatorSchedule(pydantic.BaseModel):
    """One entry of ``BOT_SCHEDULES``."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    channel: str
    """Where: ``telegram:<chat id>`` (``telegram:<chat id>:<topic id>`` for a forum topic) or
    ``discord:<channel id>``."""
    cron: str | None = None
    """A five-field cron expression read in ``tz`` (``0 9 * * 1``: Mondays at 9:00)."""
    every: float | None = None
    """Or: seconds between two occurrences (the first one interval after the start)."""
    prompt: str | None = None
    """What the model is asked to write, in the conversation."""
    text: str | None = None
    """Or: the message posted as written."""
    tz: str | None = None
    """The IANA time zone of ``cron`` (default ``BOT_TIMEZONE``)."""

    @pydantic.model_validator(mode="after")
    def _check(self) -> OperatorSchedule:
        address_of_channel(self.channel)
        if (self.cron is None) == (self.every is None):
            raise ValueError('give either "cron" (a cron expression) or "every" (seconds), not both')
        if self.cron is not None:
            check_cron(self.cron)
        if self.every is not None and not 1 <= self.every <= MAX_EVERY:  # (NaN is neither)
            raise ValueError(f'"every" is in seconds, at least 1 and at most {MAX_EVERY:.0f} (366 days)')
        if (self.prompt is None) == (self.text is None):
            raise ValueError('give either "prompt" (the model writes the message) or "text" (posted as written)')
        if not (self.prompt or self.text or "").strip():
            raise ValueError('"prompt" or "text" is empty')
        if self.tz is not None and not known_zone(self.tz):
            raise ValueError(f"unknown time zone {self.tz[:64]!r}: use an IANA name such as UTC or Europe/Paris")
        return self

    @property
    def kind(self) -> ScheduleKind:
        """A prompt for the model, or a text posted as written."""
        return ScheduleKind.TEXT if self.text is not None else ScheduleKind.PROMPT

    def schedule_id(self, default_tz: str) -> str:
        """The id of this entry's schedule: the same entry gets the same id in every process and at every start."""
        raw = json.dumps(
            [self.channel, self.cron, self.every, self.kind.value, self.prompt or self.text, self.tz or default_tz]
        )
        return OPERATOR_PREFIX + hashlib.sha256(raw.encode()).hexdigest()[:14]

    def next_at(self, now: datetime, default_tz: str) -> datetime | None:
        """Its first occurrence after ``now``."""
        return next_after(cron=self.cron, every=self.every, at=None, tz=self.tz or default_tz, after=now)


def address_of_channel(channel: str) -> tuple[str, dict[str, Any]]:
    """The context type and arguments of an operator's channel (``telegram:-100123``, ``telegram:-100123:7``,
    ``discord:4567``: the forms each registered platform declares); ``ValueError`` saying the forms otherwise."""
    return operator_channel(channel)


def parse_operator_schedules(value: Any) -> Any:
    """``BOT_SCHEDULES`` as the environment gives it (a JSON list, or empty) -> entries; ``ValueError`` naming
    the setting and the entry that is wrong."""
    value = json_list(
        value,
        setting="BOT_SCHEDULES",
        example='[{"channel": "telegram:-100123", "cron": "0 9 * * 1", "text": "Weekly stand-up!"}]',
        what="schedules",
    )
    entries = []
    for index, item in enumerate(value):
        if isinstance(item, OperatorSchedule):
            entries.append(item)
            continue
        try:
            entries.append(OperatorSchedule.model_validate(item))
        except (pydantic.ValidationError, ValidationError) as exc:
            errors = exc.errors() if isinstance(exc, pydantic.ValidationError) else [{"msg": str(exc), "loc": ()}]
            why = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else str(e["msg"]) for e in errors
            )
            raise ValueError(f"BOT_SCHEDULES[{index}]: {why.removeprefix('Value error, ')}") from None
    return tuple(entries)


async def seed_operator_schedules(
    schedules: Schedules, entries: tuple[OperatorSchedule, ...], *, default_tz: str
) -> list[Schedule]:
    """Set the operator's schedules not yet stored, and cancel the operator's schedules of their channels that
    are no longer listed; the schedules set. An entry whose platform this process does not run is skipped."""
    agent = schedules.agent
    wanted: dict[str, OperatorSchedule] = {e.schedule_id(default_tz): e for e in entries}
    conversations: set[str] = set()
    added: list[Schedule] = []
    now = schedules.clock.now()
    for sid, entry in wanted.items():
        kind, args = address_of_channel(entry.channel)
        context = agent.contexts.get(kind)
        if context is None:
            log.warning("BOT_SCHEDULES: %s is for a platform this bot does not run; skipped", entry.channel)
            continue
        address = schedules.address(context, args)
        conversations.add(address["conversation"])
        if await schedules.get(sid) is not None:
            continue
        text = entry.text if entry.text is not None else entry.prompt or ""
        tz = entry.tz or default_tz
        if entry.cron is not None:
            schedule = Schedule.cron_of(entry.cron, text=text, now=now, tz=tz, kind=entry.kind, id=sid, **address)
        else:
            schedule = Schedule.interval(
                entry.every or 0.0, text=text, now=now, tz=tz, kind=entry.kind, id=sid, **address
            )
        added.append(await schedules.set(schedule))
        log.info("BOT_SCHEDULES: set %s in %s, first at %s", sid, entry.channel, schedule.next_fire_at)
    for conversation in conversations:
        for found in await schedules.by_conversation(conversation):
            if found.creator is None and found.id.startswith(OPERATOR_PREFIX) and found.id not in wanted:
                await schedules.cancel(found.id)
                log.info("BOT_SCHEDULES: %s is no longer listed; cancelled in %s", found.id, conversation)
    return added


def upcoming_lines(entries: tuple[OperatorSchedule, ...], *, default_tz: str, now: datetime | None = None) -> list[str]:
    """The next firing of each operator's schedule, one line each (``bots config``)."""
    now = now or datetime.now(UTC)
    lines = []
    for entry in entries:
        when = entry.next_at(now, default_tz)
        tz = entry.tz or default_tz
        shown = when.astimezone(check_zone(tz)).strftime("%Y-%m-%d %H:%M") if when else "-"
        how = f"cron {entry.cron}" if entry.cron else f"every {entry.every:g}s"
        lines.append(f"{shown} {tz}  {entry.channel}  {how}  {entry.kind.value}")
    return lines
