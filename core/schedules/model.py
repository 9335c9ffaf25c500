"""What a schedule is: a conversation to speak in, what to say (a prompt for the model, or a text posted as
written), and when (once at an instant, on a cron expression or every so many seconds, in a time zone), with
the next occurrence computed once, here, for every store."""

from __future__ import annotations

import enum
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from cronsim import CronSim, CronSimError

from ..entries import InputRef
from ..errors import ValidationError

__all__ = (
    "ID_PATTERN",
    "MIN_INTERVAL",
    "SCHEDULE_INPUT",
    "Schedule",
    "ScheduleKind",
    "check_cron",
    "check_zone",
    "next_after",
    "posted_as_written",
    "to_utc",
    "valid_id",
)

SCHEDULE_INPUT = "schedule"
"""The type of the input a firing delivers to its conversation."""

ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""What a schedule id is made of (it names a Redis key: an id a model or a user typed is checked against it)."""

MIN_INTERVAL = 1.0
"""Seconds between two occurrences of an interval schedule at least (the bot's own floor: per-chat minimums are
the caller's business)."""


class ScheduleKind(enum.StrEnum):
    """What a firing does."""

    PROMPT = "prompt"
    """The text is an instruction the model reads in the conversation (``remind Alex to call the bank``): the model
    writes the message, in context."""
    TEXT = "text"
    """The text is posted as written, without asking the model (an operator's fixed announcement)."""


def valid_id(value: object) -> bool:
    """True for a well-formed schedule id (``ID_PATTERN``)."""
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def to_utc(when: datetime) -> datetime:
    """``when`` as an aware UTC datetime (a naive one is taken as UTC), to the millisecond (what every store
    keeps)."""
    aware = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return aware.replace(microsecond=aware.microsecond // 1000 * 1000)


def check_zone(name: str) -> ZoneInfo:
    """The time zone ``name`` (IANA, ``Europe/Paris``); ``ValidationError`` naming it when unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a name too long for a file name
        raise ValidationError(
            f"unknown time zone {_quoted(name)}: use an IANA name such as UTC, Europe/Paris or America/New_York"
        ) from exc


def _quoted(text: str, most: int = 60) -> str:
    """``text`` as an error quotes it: repr, and at most ``most`` characters of it (it came from a chat)."""
    return repr(text if len(text) <= most else text[: most - 1] + "…")


def check_cron(expr: str) -> str:
    """``expr`` if it is a valid five-field cron expression (``0 9 * * 1``); ``ValidationError`` otherwise."""
    expr = " ".join(expr.split())
    try:
        CronSim(expr, datetime.now(UTC))
    except CronSimError as exc:
        raise ValidationError(
            f"invalid cron expression {_quoted(expr)}: {exc}; five fields: minute hour day-of-month month day-of-week, "
            "for example '0 9 * * 1' (Mondays at 9:00)"
        ) from exc
    return expr


class Schedule(pydantic.BaseModel):
    """One schedule of one conversation. Build it with ``Schedule.once``, ``Schedule.cron_of`` or
    ``Schedule.interval``; stores keep it as JSON (``model_dump(mode="json")``)."""

    model_config = pydantic.ConfigDict(frozen=True)

    id: str = pydantic.Field(default_factory=lambda: uuid.uuid4().hex[:16])
    """Unique id (16 hex digits)."""
    conversation: str
    """The context id it belongs to (``telegram:123``): the conversation it fires in."""
    context: str
    """The context type (``telegram``): with ``args``, the address a firing is sent to."""
    args: Any = None
    """The context's arguments as JSON (``{"chat_id": 123}``): where the reply is posted."""
    creator: str | None = None
    """The platform-qualified id of the user who set it (``telegram:456``); None for the operator's."""
    tier: str | None = None
    """The creator's trust tier when it was set (``core.trust.Tier`` value): a firing acts with it, so a schedule
    has no more rights than whoever set it. None: the tier of an input without one (``BOT_TRUST_DEFAULT``)."""
    kind: ScheduleKind = ScheduleKind.PROMPT
    """A prompt for the model, or a text posted as written."""
    text: str
    """The prompt or the text."""
    at: datetime | None = None
    """Once: the instant (UTC). With ``every``: the first occurrence."""
    cron: str | None = None
    """Recurring: a five-field cron expression read in ``tz``."""
    every: float | None = None
    """Recurring: seconds between occurrences."""
    tz: str = "UTC"
    """The IANA time zone the cron expression is read in (the chat's)."""
    next_fire_at: datetime | None = None
    """The next occurrence (UTC); None once a one-off has fired."""
    created_at: datetime = pydantic.Field(default_factory=lambda: to_utc(datetime.now(UTC)))
    """When it was set (UTC)."""
    fired: int = 0
    """Occurrences fired so far."""
    missed: int = 0
    """Occurrences not fired because they were older than the grace period when found (the bot was down)."""

    @pydantic.field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not valid_id(value):
            raise ValidationError(f"a schedule id is 1 to 64 letters, digits, '_', '.' or '-', not {value[:80]!r}")
        return value

    @pydantic.field_validator("at", "next_fire_at", "created_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else to_utc(value)

    @pydantic.model_validator(mode="after")
    def _check(self) -> Schedule:
        check_zone(self.tz)
        if self.cron is not None and self.every is not None:
            raise ValidationError("a schedule has a cron expression or an interval, not both")
        if self.cron is None and self.every is None and self.at is None:
            raise ValidationError("a schedule needs a time: at (once), cron or every (recurring)")
        if self.cron is not None:
            check_cron(self.cron)
        if self.every is not None and self.every < MIN_INTERVAL:
            raise ValidationError(f"a schedule's interval must be at least {MIN_INTERVAL:g} seconds")
        if not self.text.strip():
            raise ValidationError("a schedule needs a text (the prompt, or the message to post)")
        return self

    # -- builders --------------------------------------------------------------------------------------

    @classmethod
    def once(cls, *, at: datetime, text: str, **fields: Any) -> Schedule:
        """A schedule firing once at ``at`` (naive: UTC)."""
        at = to_utc(at)
        return cls(at=at, next_fire_at=at, text=text, **fields)

    @classmethod
    def cron_of(cls, expr: str, *, text: str, now: datetime, tz: str = "UTC", **fields: Any) -> Schedule:
        """A schedule firing on the cron expression ``expr`` read in ``tz``, its first occurrence after ``now``."""
        expr = check_cron(expr)
        first = next_after(cron=expr, every=None, at=None, tz=tz, after=now)
        return cls(cron=expr, tz=tz, next_fire_at=first, text=text, created_at=now, **fields)

    @classmethod
    def interval(
        cls, every: float, *, text: str, now: datetime, start: datetime | None = None, **fields: Any
    ) -> Schedule:
        """A schedule firing every ``every`` seconds, first at ``start`` (default: ``now + every``)."""
        first = to_utc(start) if start is not None else to_utc(now) + timedelta(seconds=every)
        return cls(every=every, at=first, next_fire_at=first, text=text, created_at=now, **fields)

    # -- reading ---------------------------------------------------------------------------------------

    @property
    def recurring(self) -> bool:
        """True for a cron or interval schedule."""
        return self.cron is not None or self.every is not None

    def following(self, after: datetime) -> datetime | None:
        """The first occurrence strictly after ``after`` (None for a one-off: it fires once)."""
        if not self.recurring:
            return None
        return next_after(cron=self.cron, every=self.every, at=self.at, tz=self.tz, after=after)

    def to_json(self) -> dict[str, Any]:
        """What stores keep."""
        return self.model_dump(mode="json")


def next_after(
    *, cron: str | None, every: float | None, at: datetime | None, tz: str, after: datetime
) -> datetime | None:
    """The first occurrence strictly after ``after`` of a cron expression in ``tz`` (its wall clock: ``0 9 * * *``
    is 9:00 in ``tz`` in summer and in winter; a time a DST change skips fires at the first instant after it), or
    of an interval anchored at ``at``. Missed occurrences are skipped: one computation, however long the gap."""
    after = to_utc(after)
    if cron is not None:
        local = after.astimezone(check_zone(tz)).replace(microsecond=0)
        found: datetime = next(iter(CronSim(cron, local)))
        return to_utc(found)
    if every is not None:
        anchor = to_utc(at) if at is not None else after
        if anchor > after:
            return anchor
        steps = int((after - anchor).total_seconds() // every) + 1
        return to_utc(anchor + timedelta(seconds=steps * every))
    return None


def posted_as_written(ref: InputRef) -> bool:
    """True for a ``schedule`` input whose text is posted as written (the model is not asked)."""
    data = ref.data
    return ref.type == SCHEDULE_INPUT and isinstance(data, dict) and data.get("kind") == ScheduleKind.TEXT.value
