"""A chat's time zone: checked with zoneinfo, any case typed, pinned by the operator like the other settings, and
a zone no longer known falls back to the operator's; how a reminder reads in ``/reminders``."""

from __future__ import annotations

from datetime import UTC, datetime

from core import ChatPolicy, ChatSettings
from core.chat_settings import known_zone
from core.schedules import Schedule, ScheduleKind
from extensions.chat.commands import parse_channel_settings, zone_named
from extensions.chat.reminders import describe, find


def test_zones_are_checked_and_found_whatever_the_case() -> None:
    assert known_zone("Europe/Paris") and known_zone("UTC")
    assert not known_zone("Europe/Pariss") and not known_zone("") and not known_zone(" UTC")
    assert not known_zone("../../etc/passwd")
    assert zone_named("europe/paris") == "Europe/Paris" and zone_named(" america/new_york ") == "America/New_York"
    assert zone_named("Mars/Olympus") is None and zone_named("x" * 500) is None


def test_the_effective_zone_is_the_chats_the_operators_pin_or_the_default() -> None:
    policy = ChatPolicy(default_timezone="Europe/Paris", pinned=parse_channel_settings("7:timezone=Asia/Tokyo", "X"))
    assert policy.zone_of(policy.effective("a", ChatSettings())) == "Europe/Paris"
    assert policy.zone_of(policy.effective("a", ChatSettings(timezone="America/Lima"))) == "America/Lima"
    assert policy.zone_of(policy.effective("a", ChatSettings(timezone="Gone/Zone"))) == "Europe/Paris"
    assert policy.zone_of(policy.effective("7", ChatSettings(timezone="America/Lima"))) == "Asia/Tokyo"


def test_a_reminder_reads_in_one_line_and_is_found_by_a_prefix() -> None:
    now = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    where = {"conversation": "chat:a", "context": "chat", "args": "a"}
    once = Schedule.once(at=now, text="call\nthe   bank", creator="telegram:1", tz="Asia/Tokyo", id="abcdef12", **where)
    daily = Schedule.interval(86400, text="x" * 100, now=now, kind=ScheduleKind.TEXT, id="abcdff34", **where)
    cron = Schedule.cron_of("0 9 * * 1", text="agenda", now=now, tz="Europe/Paris", id="99", **where)
    assert describe(once, lang="en") == "abcdef · 2026-03-02 17:00 Asia/Tokyo · once · telegram:1: call the bank"
    assert describe(daily, lang="fr") == (
        f"abcdff · 2026-03-03 08:00 UTC · tous les 1 jour(s) · l'opérateur: [publié tel quel] {'x' * 79}…"
    )
    assert describe(cron, lang="en") == "99 · 2026-03-09 09:00 Europe/Paris · cron 0 9 * * 1 · the operator: agenda"
    found = [once, daily, cron]
    assert find(found, "abcdef") is once and find(found, "#ABCDFF") is daily and find(found, "99") is cron
    assert find(found, "abcd") is None  # two start so
    assert find(found, "abc") is None  # too short to guess
