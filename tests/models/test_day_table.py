"""The days a message names, dated, under it for a tool call that takes a date (``core.models.day_table``)."""

from __future__ import annotations

import datetime

import pydantic
import pytest

from core.models.base import ToolSpec
from core.models.day_table import day_note, takes_date, today_in


@pytest.mark.parametrize(
    "text",
    [
        "Today is Wednesday 2026-06-10. We open at noon.",
        "today's date: 2026-06-10",
        "The date is 2026-06-10 (today).",
        "Aujourd'hui nous sommes le 2026-06-10.",
        "Now: 2026-06-10 is today, 09:30.",
    ],
)
def test_the_day_a_text_calls_today_is_found(text: str) -> None:
    assert today_in(text) == datetime.date(2026, 6, 10)


@pytest.mark.parametrize(
    "text",
    ["Booked on 2026-06-10.", "Today we are open. The sale ends 2026-06-10.", "Today is 2026-13-40.", ""],
)
def test_a_date_not_called_today_is_not_today(text: str) -> None:
    assert today_in(text) is None


class Slot(pydantic.BaseModel):
    start: datetime.datetime


class Plan(pydantic.BaseModel):
    slots: list[Slot]
    note: str = ""


class Plain(pydantic.BaseModel):
    time: datetime.time
    guests: int


@pytest.mark.parametrize(("schema", "dated"), [(Plan, True), (Slot, True), (Plain, False)])
def test_a_tool_takes_a_date_at_any_depth(schema: type[pydantic.BaseModel], dated: bool) -> None:
    tool = ToolSpec(name="t", description="", parameters=schema.model_json_schema())
    assert takes_date(tool) is dated
    assert not takes_date(ToolSpec(name="t", description=""))


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("A table for two tomorrow at 20:00.", "tomorrow is Thursday 2026-12-31"),
        ("Room for 3 on Saturday 2026-01-02?", "Saturday is 2027-01-02"),
        (
            "Not today, the day after tomorrow.",
            "today is Wednesday 2026-12-30; day after tomorrow is Friday 2027-01-01",
        ),
        ("On Wednesday, or wednesday evening.", "Wednesday is 2026-12-30"),
        ("Demain ou lundi ?", "Demain is Thursday 2026-12-31; lundi is 2027-01-04"),
        ("Book on 2027-01-08 at 13:00.", ""),
        ("Sundays are busy.", ""),
    ],
)
def test_each_day_a_message_names_is_dated_once(text: str, note: str) -> None:
    assert day_note(text, datetime.date(2026, 12, 30)) == note
