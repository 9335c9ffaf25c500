"""The days a message names, dated, for a tool call that takes a date: a small model copies a date it reads under
the message far better than it works one out ("tomorrow", "on Saturday" from a today the bot's context states).

``today_in`` finds the day the system prompt calls today (``Today is Wednesday 2026-06-10.``, ``today's date:
2026-06-10``), ``takes_date`` whether a tool's schema has a ``date`` or ``date-time`` string, and ``day_note`` the
line shown under the message: each day it names (today, tomorrow, the day after, a weekday; in English, French,
Spanish or German) with its date, and nothing when it names none. Only those: shown the whole coming week, the
0.5B model copied its last date ("tomorrow" became next Wednesday), and a message that gives its date needs none.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from .base import ToolSpec

__all__ = ("day_note", "takes_date", "today_in")

_TODAY = re.compile(
    r"\b(?:today|aujourd'hui|hoy|heute)\b[^\n.]{0,40}?\b(\d{4}-\d{2}-\d{2})\b"
    r"|\b(\d{4}-\d{2}-\d{2})\b[^\n.\d]{0,12}?\(?\b(?:today|aujourd'hui|hoy|heute)\b",
    re.IGNORECASE,
)
"""An ISO date the text calls today, after the word (within the sentence) or just before it."""
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
"""English names whatever the locale (``strftime("%A")`` follows ``LC_TIME``)."""
_AHEAD = {
    "day after tomorrow": 2, "après-demain": 2, "pasado mañana": 2, "übermorgen": 2,
    "today": 0, "tonight": 0, "aujourd'hui": 0, "ce soir": 0, "hoy": 0, "esta noche": 0, "heute": 0,
    "tomorrow": 1, "demain": 1, "mañana": 1, "morgen": 1,
}  # fmt: skip
"""Words for a day counted from today (the longer ones first: "day after tomorrow" is not "tomorrow")."""
_NAMES = (
    _WEEKDAYS,
    ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
    ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
    ("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag"),
)
_WEEKDAY = {name.lower(): number for names in _NAMES for number, name in enumerate(names)}
_WORDS = re.compile(
    r"(?<!\w)(" + "|".join(re.escape(w) for w in [*_AHEAD, *sorted(_WEEKDAY, key=len, reverse=True)]) + r")(?!\w)",
    re.IGNORECASE,
)
_MAX_DEPTH = 4


def today_in(text: str) -> datetime.date | None:
    """The date ``text`` calls today (the first one), or None when it names none."""
    for match in _TODAY.finditer(text):
        try:
            return datetime.date.fromisoformat(match.group(1) or match.group(2))
        except ValueError:  # 2026-13-40: not a date
            continue
    return None


def takes_date(tool: ToolSpec) -> bool:
    """Whether one of ``tool``'s arguments (at any depth, through ``$ref``) is a ``date`` or ``date-time`` string."""
    root = tool.parameters if isinstance(tool.parameters, dict) else {}
    return _has_date(root, root, 0)


def _has_date(schema: Any, root: dict[str, Any], depth: int) -> bool:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return False
    if schema.get("format") in ("date", "date-time"):
        return True
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _has_date((root.get("$defs") or {}).get(ref.split("/")[-1]), root, depth + 1)
    nested: list[Any] = []
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(schema.get(key), list):
            nested += schema[key]
    if isinstance(schema.get("properties"), dict):
        nested += schema["properties"].values()
    nested.append(schema.get("items"))
    return any(_has_date(each, root, depth + 1) for each in nested)


def day_note(text: str, today: datetime.date) -> str:
    """The days ``text`` names with their dates (``tomorrow is Thursday 2026-06-11; Saturday is 2026-06-13``), in
    the order it names them, each once; a weekday is the coming one (today's, named, is today). Empty when it names
    no day."""
    said: dict[str, str] = {}
    for match in _WORDS.finditer(text):
        word = match.group(1)
        key = word.lower()
        if key in _AHEAD:
            day = today + datetime.timedelta(days=_AHEAD[key])
            dated = f"{_WEEKDAYS[day.weekday()]} {day.isoformat()}"
        else:
            day = today + datetime.timedelta(days=(_WEEKDAY[key] - today.weekday()) % 7)
            dated = day.isoformat()
        said.setdefault(key, f"{word} is {dated}")
    return "; ".join(said.values())
