"""Schedules: a conversation speaks first at a time set in advance (a reminder, a weekly post).

A schedule belongs to a conversation; at each occurrence (once, on a cron expression in a time zone, or every so
many seconds) the conversation gets an input of type ``schedule`` through the same path as a message (the agent's
dispatcher: in one process, a run; in a fleet, the conversation's inbox, with its ordering, leases and reply
ledger). A prompt is answered by the model in context; a text is posted as written.

    schedules = Schedules.attach(agent)                 # in the agent's memory store; fired while it runs
    await schedules.once(telegram_chat, {"chat_id": 1}, at=when, text="remind Alex to call the bank",
                         creator="telegram:42")
    await schedules_of(agent).by_conversation("telegram:1")

In a fleet: ``Schedules.attach(agent, core.fleet.RedisScheduleStore(backend))`` in every process (gateways with
``fire=False``).
"""

from .clock import Clock, ManualClock, SyncedClock, SystemClock
from .model import (
    MIN_INTERVAL,
    SCHEDULE_INPUT,
    Schedule,
    ScheduleKind,
    check_cron,
    check_zone,
    next_after,
    posted_as_written,
    to_utc,
    valid_id,
)
from .service import Schedules, schedule_input, schedules_of
from .store import MemoryScheduleStore, ScheduleLimitError, ScheduleStore, check_limits

__all__ = (  # noqa: RUF022 (sorted as tests/test_public_api.py sorts: plain string order)
    "Clock",
    "MIN_INTERVAL",
    "ManualClock",
    "MemoryScheduleStore",
    "SCHEDULE_INPUT",
    "Schedule",
    "ScheduleKind",
    "ScheduleLimitError",
    "ScheduleStore",
    "Schedules",
    "SyncedClock",
    "SystemClock",
    "check_cron",
    "check_limits",
    "check_zone",
    "next_after",
    "posted_as_written",
    "schedule_input",
    "schedules_of",
    "to_utc",
    "valid_id",
)
