"""A bot author's own tools on the model: does it pick the right one, fill its arguments, use the result?

The bot here is what an author would write (``core.Bot``): a todo list kept in the conversation's state (shown by
the context's ``render``), a unit converter, a calendar, a calculator, a weather lookup, a currency converter, a
timer and a note search that finds nothing, and an output of its own (``todo:list``). None is the built-in
assistant's. Beside it, a second author's bot of another style (``splitter``, issue 48): an expense splitter for a
group, whose tools take numbers and people's names (``add_expense``, ``balance``) and whose own output shows the
summary (``splitter:summary``). A third (``tables``, issue 55): a restaurant's bookings, whose tools take a date
(``YYYY-MM-DD``, named or relative to the day the context gives), a time, a number of people and an enum (where to
sit), and whose output shows the bookings (``tables:bookings``). Each runs through ``create_agent`` with the terminal chat's platform, as ``bots
chat APP`` would, the prompt form being the model's choice (the embedded model's compact form, grammar built from
these definitions).

The cases come in four kinds: ``obvious`` (one tool fits), ``choice`` (the right one among several that look
close), ``earlier`` (arguments taken from an earlier turn or from the state) and ``none`` (no tool is needed:
calling one is wrong). Each case is a fresh conversation; only its last line is checked.

Printed per model and bot: tool choice (the expected tool was called), valid arguments (it ran without an error),
argument accuracy (the arguments hold what the message said), result used (the answer after a successful tool
shows what the tool returned), refusals after a successful tool, answers after one speaking of "the person" or "the
user" in the third person, answers that are the result itself (``Done: ...``: the model's own showed nothing of it),
answers that hold the note the prompt shows a result in (``(the result of ...)``, copied), wrong calls on the no-tool messages, seconds per case. Asserts nothing: a benchmark, not a test.

Run: ``python bench/tools.py`` (the default embedded model; with ``LLM_MODEL_PATH`` or a hosted model in the
settings, ``LLM_PROVIDER=openai`` and its ``LLM_BASE_URL``, that one as well), ``--only obvious,none``,
``--limit 10``, ``--match "todo list"`` (the cases whose last line matches), ``--bot splitter`` (one bot's cases),
``--show`` to print every answer, ``--runs 3`` (seeds 7, 8 and 9: ``--seed``), ``--model FILE.gguf`` (that GGUF file instead, repeatable: how
candidates are compared).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import os
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# keep bench/ off the import path (bench/core.py would shadow the core package)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from pydantic import BaseModel, Field  # noqa: E402

from bots.calculator import evaluate  # noqa: E402
from core import (  # noqa: E402
    ActionContext,
    AgentOptions,
    Bot,
    ContextState,
    Host,
    InMemoryStore,
    Model,
    RunEventType,
    action,
    context,
    create_agent,
    escape_text,
    output,
)
from core.models import LocalModel  # noqa: E402
from extensions.terminal import cli_extension, cli_session, typed  # noqa: E402

__all__ = ("BOTS", "CASES", "Case", "bot", "main", "splitter_bot", "tables_bot")

# -- the author's bot --------------------------------------------------------------------------------------

TODOS = ("buy milk", "call the plumber", "renew the passport")
"""What every conversation's todo list holds at first."""


class TodoArgs(BaseModel):
    item: str = Field(min_length=1, description="The todo item, in a few words")


class ConvertArgs(BaseModel):
    value: float = Field(description="The amount to convert")
    from_unit: str = Field(description="The unit it is in: km, mi, kg, lb, c, f, m, ft, l, gal")
    to_unit: str = Field(description="The unit wanted")


class DayArgs(BaseModel):
    day: str = Field(min_length=1, description="A weekday (monday...sunday), today or tomorrow")


class ComputeArgs(BaseModel):
    expression: str = Field(min_length=1, description="The arithmetic to work out, e.g. 17*23")


class CityArgs(BaseModel):
    city: str = Field(min_length=1, description="The city")


class ExchangeArgs(BaseModel):
    amount: float = Field(description="The amount of money")
    from_currency: str = Field(description="Its currency code, e.g. EUR")
    to_currency: str = Field(description="The currency code wanted, e.g. USD")


class TimerArgs(BaseModel):
    minutes: int = Field(ge=1, le=600, description="Minutes until it rings")


class SearchArgs(BaseModel):
    query: str = Field(min_length=1, description="Words to look for in the notes")


def _todos(ctx: ActionContext) -> list[str]:
    todos: list[str] = ctx.memory.setdefault("todos", list(TODOS))
    return todos


def _add_todo(args: TodoArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    _todos(ctx).append(args.item.strip())
    return {"added": args.item.strip(), "items_now": len(_todos(ctx))}


def _remove_todo(args: TodoArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    todos = _todos(ctx)
    words = set(re.findall(r"\w+", args.item.lower()))
    match = next((t for t in todos if words & set(re.findall(r"\w+", t))), None)
    if match is None:
        raise ValueError(f"no todo like {args.item!r}")
    todos.remove(match)
    return {"removed": match, "items_left": len(todos)}


_UNITS = {
    ("km", "mi"): 0.621371,
    ("mi", "km"): 1.609344,
    ("kg", "lb"): 2.204623,
    ("lb", "kg"): 0.453592,
    ("m", "ft"): 3.28084,
    ("ft", "m"): 0.3048,
    ("l", "gal"): 0.264172,
    ("gal", "l"): 3.785412,
}
_UNIT_NAMES = {
    "kilometers": "km", "kilometres": "km", "kilometer": "km", "kilometre": "km", "miles": "mi", "mile": "mi",
    "kilograms": "kg", "kilogram": "kg", "kilos": "kg", "pounds": "lb", "pound": "lb", "lbs": "lb",
    "meters": "m", "metres": "m", "meter": "m", "metre": "m", "feet": "ft", "foot": "ft", "liters": "l",
    "litres": "l", "liter": "l", "litre": "l", "gallons": "gal", "gallon": "gal", "celsius": "c", "fahrenheit": "f",
    "°c": "c", "°f": "f",
}  # fmt: skip


def _unit(name: str) -> str:
    name = name.strip().lower()
    return _UNIT_NAMES.get(name, name)


def _convert(args: ConvertArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    src, dst = _unit(args.from_unit), _unit(args.to_unit)
    if (src, dst) == ("c", "f"):
        value = args.value * 9 / 5 + 32
    elif (src, dst) == ("f", "c"):
        value = (args.value - 32) * 5 / 9
    elif (src, dst) in _UNITS:
        value = args.value * _UNITS[src, dst]
    else:
        raise ValueError(f"cannot convert {args.from_unit} to {args.to_unit}")
    return {"value": round(value, 2), "unit": dst}


_CALENDAR = {
    "monday": "team meeting at 09:30",
    "tuesday": "dentist at 15:30",
    "wednesday": "yoga class at 18:45",
    "thursday": "lunch with Priya at 12:15",
    "friday": "flight to Lisbon at 07:50",
    "saturday": "football match at 16:00",
    "sunday": "nothing planned",
}


def _calendar(args: DayArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    day = args.day.strip().lower()
    day = {"today": "wednesday", "tomorrow": "thursday"}.get(day, day)
    found = next((d for d in _CALENDAR if d.startswith(day[:3])), None)
    if found is None:
        raise ValueError(f"{args.day!r} is not a day: use monday...sunday, today or tomorrow")
    return {"day": found, "events": _CALENDAR[found]}


def _compute(args: ComputeArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    return {"result": evaluate(args.expression)}


def _weather(args: CityArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    return {"city": args.city, "forecast": "light rain", "temperature_c": 14}


_RATES = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "JPY": 162.0, "CHF": 0.95}


def _exchange(args: ExchangeArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    src, dst = args.from_currency.strip().upper()[:3], args.to_currency.strip().upper()[:3]
    if src not in _RATES or dst not in _RATES:
        raise ValueError(f"unknown currency: use one of {', '.join(_RATES)}")
    return {"amount": round(args.amount / _RATES[src] * _RATES[dst], 2), "currency": dst}


def _timer(args: TimerArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    return {"timer": "set", "rings_in_minutes": args.minutes}


def _search_notes(args: SearchArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    return {"query": args.query, "notes_found": 0, "results": []}


ACTIONS = (
    action(name="add_todo", description="Adds an item to the person's todo list.", schema=TodoArgs, handler=_add_todo),
    action(
        name="remove_todo",
        description="Removes an item from the todo list (done or no longer needed).",
        schema=TodoArgs,
        handler=_remove_todo,
    ),
    action(
        name="convert",
        description="Converts a value between units (km/miles, kg/pounds, m/feet, litres/gallons, Celsius/Fahrenheit).",
        instructions="Use it for distances, weights, lengths, volumes and temperatures, never for money.",
        schema=ConvertArgs,
        handler=_convert,
    ),
    action(
        name="calendar",
        description="The person's appointments on a given day.",
        instructions="Use it when they ask about their plans, agenda or appointments on a day.",
        schema=DayArgs,
        handler=_calendar,
    ),
    action(name="compute", description="Works out arithmetic exactly.", schema=ComputeArgs, handler=_compute),
    action(name="weather", description="Today's weather forecast in a city.", schema=CityArgs, handler=_weather),
    action(
        name="exchange",
        description="Converts an amount of money between currencies (EUR, USD, GBP, JPY, CHF).",
        instructions="Use it for euros, dollars, pounds sterling, yen or francs.",
        schema=ExchangeArgs,
        handler=_exchange,
    ),
    action(name="set_timer", description="Sets a countdown timer.", schema=TimerArgs, handler=_timer),
    action(
        name="search_notes",
        description="Searches the person's saved notes for words.",
        instructions="Use it when they ask to search or find something in their notes.",
        schema=SearchArgs,
        handler=_search_notes,
    ),
)


def _render(state: ContextState[Any]) -> str:
    todos = state.memory.get("todos", list(TODOS)) if isinstance(state.memory, dict) else list(TODOS)
    return "Todo list:\n" + "\n".join(f"{n}. {escape_text(t)}" for n, t in enumerate(todos, 1))


todo_list = output(
    type="todo:list",
    description="Shows the person their whole todo list.",
    instructions="Use it when they ask to see their todo list.",
)
planner = context(
    type="planner",
    schema=str,
    key=lambda session: session,
    create=lambda state: {"todos": list(TODOS)},
    render=_render,
    instructions="Today is Wednesday.",
)


def bot() -> Bot:
    """The author's bot: a planner with nine actions and an output of its own."""
    return Bot(
        name="planner",
        persona="You are Plan, a helpful planning assistant.",
        context=planner,
        actions=ACTIONS,
        outputs=[todo_list],
    )


# -- a second author's bot: an expense splitter ----------------------------------------------------------------

PEOPLE = ("Ana", "Ben", "Carla")
"""The group every splitter conversation starts with."""
EXPENSES = ({"payer": "Ana", "amount": 30.0, "what": "dinner"}, {"payer": "Ben", "amount": 12.0, "what": "taxi"})
"""What every splitter conversation has spent at first."""


class ExpenseArgs(BaseModel):
    payer: str = Field(min_length=1, description="Who paid, by first name")
    amount: float = Field(gt=0, description="How much they paid, a number (e.g. 12.50)")
    what: str = Field(default="", description="What it was for, in a few words")


class NoArgs(BaseModel):
    pass


def _expenses(ctx: ActionContext) -> list[dict[str, Any]]:
    expenses: list[dict[str, Any]] = ctx.memory.setdefault("expenses", [dict(e) for e in EXPENSES])
    return expenses


def _add_expense(args: ExpenseArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    payer = args.payer.strip().title()
    people: list[str] = ctx.memory.setdefault("people", list(PEOPLE))
    if payer not in people:
        people.append(payer)
    _expenses(ctx).append({"payer": payer, "amount": round(args.amount, 2), "what": args.what.strip()})
    return {"added": f"{payer} paid {args.amount:.2f}", "expenses_now": len(_expenses(ctx))}


def _balance(args: NoArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    people: list[str] = ctx.memory.setdefault("people", list(PEOPLE))
    expenses = _expenses(ctx)
    share = sum(e["amount"] for e in expenses) / len(people)
    paid = {p: sum(e["amount"] for e in expenses if e["payer"] == p) for p in people}
    owes = [f"{p} owes {share - paid[p]:.2f}" for p in people if share - paid[p] > 0.005]
    gets = [f"{p} gets back {paid[p] - share:.2f}" for p in people if paid[p] - share > 0.005]
    return {"each_share": round(share, 2), "owes": owes, "gets_back": gets}


def _splitter_render(state: ContextState[Any]) -> str:
    memory = state.memory if isinstance(state.memory, dict) else {}
    people = memory.get("people", list(PEOPLE))
    expenses = memory.get("expenses", list(EXPENSES))
    lines = [f"- {escape_text(e['payer'])} paid {e['amount']:.2f} for {escape_text(e['what'])}" for e in expenses]
    return f"The group: {', '.join(escape_text(p) for p in people)}\nExpenses:\n" + "\n".join(lines)


SPLITTER_ACTIONS = (
    action(
        name="add_expense",
        description="Records that someone in the group paid an amount for something.",
        instructions="Use it whenever the person says someone paid or spent money.",
        schema=ExpenseArgs,
        handler=_add_expense,
    ),
    action(
        name="balance",
        description="Works out who owes whom in the group, from every expense recorded.",
        instructions="Use it when they ask who owes what, or how to settle up.",
        schema=NoArgs,
        handler=_balance,
    ),
)
splitter_summary = output(
    type="splitter:summary",
    description="Shows the group a summary of every expense: who paid what, for what.",
    instructions="Use it when they ask to see the expenses or a summary of them.",
)
trip = context(
    type="trip",
    schema=str,
    key=lambda session: session,
    create=lambda state: {"people": list(PEOPLE), "expenses": [dict(e) for e in EXPENSES]},
    render=_splitter_render,
)


def splitter_bot() -> Bot:
    """The second author's bot: a group's expenses, two actions with numbers and names, an output of its own."""
    return Bot(
        name="splitter",
        persona="You are Split, who keeps a group's shared expenses.",
        context=trip,
        actions=SPLITTER_ACTIONS,
        outputs=[splitter_summary],
    )


# -- a third author's bot: table bookings (dates, times, a count, an enum) ---------------------------------------

TODAY = datetime.date(2026, 6, 10)
"""The restaurant's today (a Wednesday): "tomorrow" is 2026-06-11, "Friday" 2026-06-12."""
BOOKINGS = (
    {"id": 1, "date": "2026-06-12", "time": "19:30", "guests": 2, "area": "terrace"},
    {"id": 2, "date": "2026-06-14", "time": "12:30", "guests": 5, "area": "inside"},
)
"""The person's bookings in every conversation at first."""


class BookArgs(BaseModel):
    date: datetime.date = Field(description="The day of the booking, YYYY-MM-DD")
    time: datetime.time = Field(description="The time of the booking, HH:MM (24 h), between 12:00 and 22:00")
    guests: int = Field(ge=1, le=12, description="How many people")
    area: Literal["inside", "terrace", "bar"] = Field(default="inside", description="Where to sit")


class CancelArgs(BaseModel):
    booking_id: int = Field(ge=1, description="The number of the booking to cancel")


class AvailabilityArgs(BaseModel):
    date: datetime.date = Field(description="The day, YYYY-MM-DD")
    guests: int = Field(ge=1, le=12, description="How many people")


def _bookings(ctx: ActionContext) -> list[dict[str, Any]]:
    bookings: list[dict[str, Any]] = ctx.memory.setdefault("bookings", [dict(b) for b in BOOKINGS])
    return bookings


def _book(args: BookArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    if args.date < TODAY:
        raise ValueError(f"{args.date} is in the past: today is {TODAY}")
    if not datetime.time(12) <= args.time <= datetime.time(22):
        raise ValueError("the restaurant takes bookings from 12:00 to 22:00")
    bookings = _bookings(ctx)
    number = max((b["id"] for b in bookings), default=0) + 1
    booked = {"date": args.date.isoformat(), "time": args.time.strftime("%H:%M"), "guests": args.guests}
    bookings.append({"id": number, **booked, "area": args.area})
    return {"booking": number, **booked, "area": args.area}


def _cancel(args: CancelArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    bookings = _bookings(ctx)
    found = next((b for b in bookings if b["id"] == args.booking_id), None)
    if found is None:
        raise ValueError(f"no booking number {args.booking_id}: the bookings are {[b['id'] for b in bookings]}")
    bookings.remove(found)
    return {"cancelled": args.booking_id, "was": f"{found['date']} at {found['time']}"}


def _availability(args: AvailabilityArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    if args.guests > 8:
        return {"date": args.date.isoformat(), "free_times": [], "note": "groups over 8 only by phone"}
    free = ["12:00", "13:30", "19:00", "21:00"] if args.date.weekday() < 5 else ["12:30", "20:30"]
    return {"date": args.date.isoformat(), "guests": args.guests, "free_times": free}


def _tables_render(state: ContextState[Any]) -> str:
    memory = state.memory if isinstance(state.memory, dict) else {}
    bookings = memory.get("bookings", list(BOOKINGS))
    lines = [
        f"- number {b['id']}: {b['date']} at {b['time']}, {b['guests']} people, {escape_text(b['area'])}"
        for b in bookings
    ]
    return "The person's bookings:\n" + ("\n".join(lines) or "none")


TABLES_ACTIONS = (
    action(
        name="book_table",
        description="Books a table at the restaurant for a day, a time and a number of people.",
        instructions="Use it when the person asks to book or reserve a table.",
        schema=BookArgs,
        handler=_book,
    ),
    action(
        name="cancel_booking",
        description="Cancels one of the person's bookings, by its number.",
        schema=CancelArgs,
        handler=_cancel,
    ),
    action(
        name="availability",
        description="The free times on a day for a number of people.",
        instructions="Use it when they ask whether there is a free table or room on a day.",
        schema=AvailabilityArgs,
        handler=_availability,
    ),
)
tables_bookings = output(
    type="tables:bookings",
    description="Shows the person all their bookings.",
    instructions="Use it when they ask to see their bookings.",
)
restaurant = context(
    type="restaurant",
    schema=str,
    key=lambda session: session,
    create=lambda state: {"bookings": [dict(b) for b in BOOKINGS]},
    render=_tables_render,
    instructions=f"Today is Wednesday {TODAY.isoformat()}. The restaurant is open every day from 12:00 to 23:00.",
)


def tables_bot() -> Bot:
    """The third author's bot: a restaurant's bookings, tools with dates, times, counts and an enum."""
    return Bot(
        name="tables",
        persona="You are Tabla, who takes table bookings for the Olive Tree restaurant.",
        context=restaurant,
        actions=TABLES_ACTIONS,
        outputs=[tables_bookings],
    )


BOTS = {"planner": bot, "splitter": splitter_bot, "tables": tables_bot}
"""The bots of the cases, by name."""


# -- the cases ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Case:
    """One short conversation; only the last line is checked."""

    kind: str
    """obvious, choice, earlier or none."""
    turns: tuple[str, ...]
    """What the person writes, one line per turn."""
    tool: str | None
    """The action (or output) the last line needs; None: none."""
    args: dict[str, str] = field(default_factory=dict)
    """Argument -> a regular expression (case-insensitive) its JSON value must match."""
    used: str = ""
    """A regular expression (case-insensitive) the answer after the tool must match: the result shown."""
    bot: str = "planner"
    """The bot of ``BOTS`` it talks to."""


def _c(kind: str, turns: str | Sequence[str], tool: str | None, used: str = "", **args: str) -> Case:
    lines = (turns,) if isinstance(turns, str) else tuple(turns)
    return Case(kind=kind, turns=lines, tool=tool, args=args, used=used)


def _t(kind: str, turns: str | Sequence[str], tool: str | None, used: str = "", **args: str) -> Case:
    lines = (turns,) if isinstance(turns, str) else tuple(turns)
    return Case(kind=kind, turns=lines, tool=tool, args=args, used=used, bot="tables")


def _s(kind: str, turns: str | Sequence[str], tool: str | None, used: str = "", **args: str) -> Case:
    lines = (turns,) if isinstance(turns, str) else tuple(turns)
    return Case(kind=kind, turns=lines, tool=tool, args=args, used=used, bot="splitter")


CASES: tuple[Case, ...] = (
    # one obvious tool
    _c("obvious", "Convert 10 kilometers to miles.", "convert", r"6[.,]2", value="^10", from_unit="k", to_unit="mi"),
    _c("obvious", "How many pounds is 5 kg?", "convert", r"11[.,]0", value="^5", from_unit="k", to_unit="(lb|pound)"),
    _c("obvious", "What is 30 degrees Celsius in Fahrenheit?", "convert", r"\b86\b", value="^30", from_unit="c"),
    _c("obvious", "Add 'water the plants' to my todo list.", "add_todo", r"plant|added|todo", item="plant"),
    _c("obvious", "Put 'book a haircut' on my todo list please.", "add_todo", r"haircut|added|todo", item="haircut"),
    _c("obvious", "What's on my calendar on Tuesday?", "calendar", r"dentist|15:30", day="tue"),
    _c("obvious", "Do I have any appointments on Friday?", "calendar", r"lisbon|07:50|flight", day="fri"),
    _c("obvious", "Compute 17*23.", "compute", r"\b391\b", expression=r"17\s*\*\s*23"),
    _c("obvious", "What's 1234 times 56?", "compute", r"69[,.]?104", expression=r"1234\s*\*\s*56"),
    _c("obvious", "What's the weather like in Oslo today?", "weather", r"rain|14", city="oslo"),
    _c("obvious", "Convert 100 euros to dollars.", "exchange", r"\b108\b", amount="^100", to_currency="usd"),
    _c("obvious", "Set a timer for 15 minutes.", "set_timer", r"\b15\b|set", minutes="^15$"),
    _c("obvious", "Search my notes for the wifi password.", "search_notes", r"no |not |nothing|couldn|0", query="wifi"),
    _c("obvious", "Remove 'buy milk' from my todo list.", "remove_todo", r"milk|removed", item="milk"),
    _c("obvious", "Show me my todo list.", "todo:list", r"milk", text="milk"),
    _c("obvious", "Start a 5 minute timer.", "set_timer", r"\b5\b|set", minutes="^5$"),
    # the right one among several
    _c("choice", "How many feet are in 100 meters?", "convert", r"328", value="^100", from_unit="m", to_unit="f"),
    _c("choice", "I need to remember to pay the rent, add it to my list.", "add_todo", r"rent|added", item="rent"),
    _c("choice", "Is it going to rain in Madrid?", "weather", r"rain|14", city="madrid"),
    _c("choice", "How much is 50 pounds sterling in euros?", "exchange", r"58[.,]8", amount="^50", from_currency="gbp"),
    _c("choice", "Multiply 48 by 12 for me.", "compute", r"\b576\b", expression=r"48\s*\*\s*12"),
    _c("choice", "What do I have on Monday?", "calendar", r"meeting|09:30", day="mon"),
    _c("choice", "I already called the plumber, take it off my list.", "remove_todo", r"plumber|removed", item="plumb"),
    _c("choice", "Wake me in 45 minutes.", "set_timer", r"\b45\b|set", minutes="^45$"),
    _c(
        "choice",
        "Find my notes about the garden project.",
        "search_notes",
        r"no |not |nothing|couldn|0",
        query="garden",
    ),
    _c("choice", "How many liters is 3 gallons?", "convert", r"11[.,]36", value="^3", from_unit="gal", to_unit="l"),
    _c("choice", "What's 250 dollars in yen?", "exchange", r"37[,.]?500", amount="^250", to_currency="jpy"),
    _c("choice", "Any plans for Saturday?", "calendar", r"football|16:00", day="sat"),
    _c("choice", "What's 15% of 80? Work it out exactly.", "compute", r"\b12\b", expression=r"80|15"),
    _c("choice", "Is it cold in Helsinki right now?", "weather", r"14|rain", city="helsinki"),
    # arguments from earlier turns or from the state
    _c(
        "earlier",
        ("I'm flying to Lisbon on Friday.", "What's the weather there?"),
        "weather",
        r"rain|14",
        city="lisbon",
    ),
    _c(
        "earlier",
        ("My run this morning was 8 kilometers.", "How far is that in miles?"),
        "convert",
        r"4[.,]97",
        value="^8",
    ),
    _c("earlier", ("I bought 2 kg of apples.", "How many pounds is that?"), "convert", r"4[.,]4", value="^2"),
    _c("earlier", ("I have 200 euros left.", "How much is that in pounds?"), "exchange", r"\b170\b", amount="^200"),
    _c("earlier", ("The tea needs 4 minutes.", "Set a timer for it."), "set_timer", r"\b4\b|set", minutes="^4$"),
    _c(
        "earlier",
        ("I work from home on Thursday.", "What's on my calendar that day?"),
        "calendar",
        r"priya|12:15",
        day="thu",
    ),
    _c("earlier", "Take the first item off my todo list.", "remove_todo", r"milk|removed", item="milk"),
    _c("earlier", "Remove the last item of my todo list.", "remove_todo", r"passport|removed", item="passport"),
    _c(
        "earlier",
        ("I need to call the bank tomorrow.", "Add that to my todo list."),
        "add_todo",
        r"bank|added",
        item="bank",
    ),
    _c("earlier", ("My garden is 12 meters long.", "Convert that to feet."), "convert", r"39[.,]3", value="^12"),
    _c(
        "earlier",
        ("Berlin is where my sister lives.", "What's the weather in her city?"),
        "weather",
        r"rain|14",
        city="berlin",
    ),
    _c(
        "earlier",
        ("I spent 37 dollars on lunch and 18 on a taxi.", "Compute the total."),
        "compute",
        r"\b55\b",
        expression="37",
    ),
    _c(
        "earlier",
        ("I wrote a note about the recipe for lasagna.", "Search my notes for it."),
        "search_notes",
        r"no |not |nothing|couldn|0",
        query="lasagna",
    ),
    _c("earlier", "What's on my calendar today?", "calendar", r"yoga|18:45", day="(wed|today)"),
    # no tool needed
    _c("none", "Hello! How are you?", None),
    _c("none", "Thanks a lot, that's all.", None),
    _c("none", "What is the capital of France?", None),
    _c("none", "Tell me a short joke.", None),
    _c("none", "Who wrote Romeo and Juliet?", None),
    _c("none", "Good night!", None),
    _c("none", "What does a plumber do?", None),
    _c("none", "I love rainy days.", None),
    _c("none", "What is a kilometer?", None),
    _c("none", "Can you recommend a good book?", None),
    _c("none", "How are you today?", None),
    _c("none", "What's your name?", None),
    _c("none", "Why is the sky blue?", None),
    _c("none", "Say hi to my friend Tom.", None),
    _c("none", "My favourite colour is green.", None),
    _c("none", "What language is spoken in Brazil?", None),
    _c("none", "Bonjour, comment ça va ?", None),
    _c("none", "How many items are on my todo list?", None),
    # the splitter: numbers, people's names, an output of its own
    _s("obvious", "Ana paid 30 euros for dinner.", "add_expense", r"ana|30|added|record", payer="ana", amount="^30"),
    _s(
        "obvious", "Add an expense: Ben paid 12.50 for the taxi.", "add_expense", r"ben|12", payer="ben", amount="^12.5"
    ),
    _s("obvious", "Who owes whom?", "balance", r"owe|carla|\b14\b"),
    _s("obvious", "Show me a summary of our expenses.", "splitter:summary", r"ana|dinner|30", text="ana|dinner|30|ben"),
    _s("choice", "Carla paid 45 euros for the groceries.", "add_expense", r"carla|45", payer="carla", amount="^45"),
    _s("choice", "How do we settle up?", "balance", r"owe|carla|\b14\b"),
    _s("choice", "Dan spent 18.40 on museum tickets.", "add_expense", r"dan|18", payer="dan", amount="^18.4"),
    _s(
        "earlier",
        ("Carla bought the train tickets.", "They cost 60 euros, add it."),
        "add_expense",
        r"carla|60",
        payer="carla",
        amount="^60",
    ),
    _s(
        "earlier",
        ("We just had lunch by the sea.", "Ben paid 27 for it, please add that."),
        "add_expense",
        r"ben|27",
        payer="ben",
        amount="^27",
    ),
    _s("none", "Hi, we are three friends on a trip.", None),
    _s("none", "Thanks, that's all for now.", None),
    _s("none", "What is a fair way to split a bill?", None),
    # the tables: dates (named or relative), times, a count and an enum
    _t(
        "obvious",
        "Book a table for 4 on 2026-06-20 at 19:30 on the terrace.",
        "book_table",
        r"20|19:30|book",
        date="2026-06-20",
        time="^19:30",
        guests="^4$",
        area="terrace",
    ),
    _t("obvious", "Cancel booking number 1.", "cancel_booking", r"\b1\b|cancel", booking_id="^1$"),
    _t("obvious", "Show me my bookings.", "tables:bookings", r"19:30|12:30", text="19:30|12:30|2026"),
    _t(
        "obvious",
        "Is there a free table for 6 people on 2026-06-16?",
        "availability",
        r"12:00|13:30|19:00|21:00",
        date="2026-06-16",
        guests="^6$",
    ),
    _t(
        "choice",
        "Reserve a table at the bar for two tomorrow at 20:00.",
        "book_table",
        r"20:00|book|reserv",
        date="2026-06-11",
        time="^20:00",
        guests="^2$",
        area="bar",
    ),
    _t(
        "choice",
        "Do you have room for 3 on Saturday 2026-06-13?",
        "availability",
        r"12:30|20:30",
        date="2026-06-13",
        guests="^3$",
    ),
    _t(
        "choice",
        "We are 7 people, book us inside on 2026-06-18 at 13:00.",
        "book_table",
        r"13:00|book",
        date="2026-06-18",
        time="^13:00",
        guests="^7$",
        area="inside",
    ),
    _t(
        "earlier",
        ("We will be five people.", "Book us a table on the terrace on 2026-06-19 at 21:00."),
        "book_table",
        r"21:00|book",
        date="2026-06-19",
        guests="^5$",
        area="terrace",
    ),
    _t(
        "earlier",
        ("I can't make it on the 14th.", "Cancel that booking."),
        "cancel_booking",
        r"\b2\b|cancel",
        booking_id="^2$",
    ),
    _t("none", "Hello, good evening!", None),
    _t("none", "What time do you close?", None),
    _t("none", "Thank you, see you on Friday!", None),
    _t("none", "Is the terrace nice in summer?", None),
)
"""The fixed set of conversations: the planner's 16 obvious, 14 choice, 14 earlier, 18 none; the splitter's 4
obvious, 3 choice, 2 earlier, 3 none; the tables' 4 obvious, 3 choice, 2 earlier, 4 none."""

_REFUSAL = re.compile(r"i'?m sorry|sorry, but|can'?t assist|cannot assist|can'?t help|cannot help|unable to", re.I)
"""A refusal: after a tool that succeeded, a defect."""
_THIRD_PERSON = re.compile(r"\b(?:the|this) (?:user|person|writer|customer)\b", re.I)
"""The person written to spoken of in the third person ("The person booked a table ..."), a defect."""
_BARE_RESULT = re.compile(r"\ADone(?:\.|: )")
"""The tool's result given as the answer (``answer_guards.fallback_answer``): the model's own answer showed nothing
of it twice. "result used" counts it as used, so it is counted apart: a prompt that makes the model's answers worse
shows here."""
_NOTE_COPIED = re.compile(r"\(the result of ", re.I)
"""The note the prompt shows a result in (``answer_guards.result_note``), copied into the answer, a defect."""


# -- running -----------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Outcome:
    """What happened on a case's last line."""

    case: Case
    answer: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)
    """Actions called (name, JSON arguments), and the output of the case's tool when it is an output."""
    results: list[tuple[str, bool]] = field(default_factory=list)
    """Per result: the action and whether it succeeded."""
    seconds: float = 0.0
    before: list[str] = field(default_factory=list)
    """The tools called on the case's lines before its last: remarks that give what the request will need ("I
    bought 2 kg of apples."), which ask for nothing."""

    @property
    def chose(self) -> bool:
        return any(name == self.case.tool for name, _ in self.calls)

    @property
    def valid(self) -> bool:
        if self.case.tool is not None and ":" in self.case.tool:  # an output of the bot's own
            return self.chose
        return self.chose and any(name == self.case.tool and ok for name, ok in self.results)

    @property
    def accurate(self) -> bool:
        for name, raw in self.calls:
            if name != self.case.tool:
                continue
            try:
                args = json.loads(raw) if raw.strip() else {}
            except ValueError:
                continue
            if all(
                re.search(pattern, json.dumps(args.get(key, ""), ensure_ascii=False).strip('"'), re.I)
                for key, pattern in self.case.args.items()
            ):
                return True
        return False

    @property
    def used(self) -> bool:
        return bool(re.search(self.case.used, self.answer, re.I)) if self.case.used else bool(self.answer.strip())

    @property
    def refused(self) -> bool:
        return bool(_REFUSAL.search(self.answer))

    @property
    def third_person(self) -> bool:
        return bool(_THIRD_PERSON.search(self.answer))

    @property
    def bare(self) -> bool:
        return bool(_BARE_RESULT.match(self.answer))

    @property
    def copied(self) -> bool:
        return bool(_NOTE_COPIED.search(self.answer))


async def _turn(agent: Any, session: str, text: str) -> Outcome:
    outcome = Outcome(case=CASES[0])
    parts: list[str] = []
    started = time.perf_counter()
    async for event in agent.stream(cli_session, session, typed(session, text), reasoning=False):
        if event.final and event.content is not None:
            parts.append(str(event.content))
            if event.output_type != "cli:message":
                outcome.calls.append((str(event.output_type), json.dumps({"text": str(event.content)})))
        elif event.type == RunEventType.TOOL_CALL and isinstance(event.content, dict):
            outcome.calls.append((str(event.content.get("name")), str(event.content.get("arguments") or "")))
        elif event.type == RunEventType.TOOL_CALL_RESULT and isinstance(event.content, dict):
            outcome.results.append((str(event.content.get("name")), "error" not in event.content))
        elif event.type == RunEventType.ERROR:
            parts.append(f"[error] {event.content}")
    outcome.answer = "\n".join(parts)
    outcome.seconds = time.perf_counter() - started
    return outcome


async def run(model: Model, cases: Sequence[Case], *, show: bool = False) -> list[Outcome]:
    """Every case with a fresh conversation of its bot on ``model``, in order."""
    outcomes: list[Outcome] = []
    for name in dict.fromkeys(c.bot for c in cases):
        outcomes += await _run_bot(model, BOTS[name](), [c for c in cases if c.bot == name], show=show)
    return sorted(outcomes, key=lambda o: cases.index(o.case))


async def _run_bot(model: Model, author_bot: Bot, cases: Sequence[Case], *, show: bool) -> list[Outcome]:
    # a shared machine may take long over a tool's decision and call (its answer comes whole): a minute's silence
    # is not a failure here, the seconds per case say how long it took
    options = AgentOptions(model_idle_timeout=600.0)
    agent = create_agent(
        model=model, bot=author_bot, extensions=[cli_extension()], memory=InMemoryStore(), options=options
    )
    outcomes = []
    async with agent:
        for number, case in enumerate(cases):
            session = f"tools-{number}"
            seconds = 0.0
            outcome = Outcome(case=case)
            before: list[str] = []
            for line in case.turns:
                before += [name for name, _ in outcome.calls]
                outcome = await _turn(agent, session, line)
                seconds += outcome.seconds
                if show:
                    called = "".join(f" [{n} {a}]" for n, a in outcome.calls)
                    print(
                        f"  [{case.kind}] {line!r} ->{called} {outcome.answer!r} ({outcome.seconds:.1f}s)", flush=True
                    )
            outcome.case, outcome.seconds, outcome.before = case, seconds, before
            outcomes.append(outcome)
    return outcomes


def _pct(hits: int, total: int) -> str:
    return f"{hits}/{total} ({100 * hits / max(1, total):.0f}%)"


def summary(name: str, outcomes: Sequence[Outcome]) -> str:
    """One line of figures for ``outcomes``."""
    tool_cases = [o for o in outcomes if o.case.tool is not None]
    none_cases = [o for o in outcomes if o.case.tool is None]
    after = [o for o in tool_cases if o.valid and ":" not in (o.case.tool or "")]
    remarked = [o for o in outcomes if len(o.case.turns) > 1]
    kinds = " ".join(
        f"{kind} {sum(o.valid and o.accurate for o in outcomes if o.case.kind == kind)}/"
        f"{sum(o.case.kind == kind for o in outcomes)}"
        for kind in ("obvious", "choice", "earlier")
    )
    seconds = [o.seconds for o in outcomes]
    return (
        f"{name}: tool choice {_pct(sum(o.chose for o in tool_cases), len(tool_cases))}"
        f" | right tool with valid args {_pct(sum(o.valid for o in tool_cases), len(tool_cases))}"
        f" | argument accuracy {_pct(sum(o.valid and o.accurate for o in tool_cases), len(tool_cases))} ({kinds})"
        f" | result used {_pct(sum(o.used for o in after), len(after))}"
        f" | refusals after a tool {sum(o.refused for o in after)}"
        f" | in the third person {sum(o.third_person for o in after)}"
        f" | the result itself as the answer {sum(o.bare for o in after)}"
        f" | the prompt's note copied {sum(o.copied for o in after)}"
        f" | no tool on no-tool messages {_pct(sum(not o.calls for o in none_cases), len(none_cases))}"
        f" | no tool on the remarks before a request {_pct(sum(not o.before for o in remarked), len(remarked))}"
        f" | {statistics.mean(seconds) if seconds else 0:.1f} s/case (median {statistics.median(seconds) if seconds else 0:.1f})"
    )


def _failures(outcomes: Sequence[Outcome]) -> list[str]:
    lines = []
    for o in outcomes:
        wrong = []
        if o.case.tool is None and o.calls:
            wrong.append(f"called {[n for n, _ in o.calls]}")
        elif o.case.tool is not None:
            if not o.valid:
                wrong.append(f"tool {o.calls or 'none'} results {o.results}")
            elif not o.accurate:
                wrong.append(f"arguments {o.calls}")
            elif not o.used or o.refused:
                wrong.append("result not used" if not o.used else "refused")
        if o.before:
            wrong.append(f"called {o.before} on the remark before")
        if wrong:
            lines.append(f"  [{o.case.kind}] {o.case.turns[-1]!r}: {'; '.join(wrong)} -> {o.answer[:120]!r}")
    return lines


def models(paths: Sequence[str] = (), *, seed: int = 7) -> list[tuple[str, Model]]:
    """The GGUF files ``paths`` (``--model``) if any; else the default embedded model, and the one the settings name
    if it is another (``LLM_MODEL_PATH``, a hosted model). An embedded model samples with a fixed seed (``--seed``),
    so that a run's counts are the same on any machine that runs the same llama.cpp; runs with other seeds show
    what the sampling of its answers (the decisions and calls are greedy) changes in the turns after them."""
    if paths:
        return [(Path(p).name, LocalModel(model_path=Path(p), seed=seed)) for p in paths]
    chosen: list[tuple[str, Model]] = [("default embedded model", LocalModel(seed=seed))]
    if os.environ.get("LLM_MODEL_PATH") or os.environ.get("LLM_PROVIDER", "local") != "local":
        from bots.models import build_model
        from bots.settings import Settings

        other = build_model(Settings().llm)
        chosen.append((getattr(other, "name", "settings' model"), other))
    return chosen


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="kinds, comma-separated (obvious, choice, earlier, none)")
    parser.add_argument("--limit", type=int, default=0, help="the first N cases of each kind")
    parser.add_argument("--match", default="", help="only the cases whose last line matches this regular expression")
    parser.add_argument("--bot", default="", help="only this bot's cases (planner, splitter, tables)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--seed", type=int, default=7, help="the embedded model's sampling seed (7; each further run the next one)"
    )
    parser.add_argument("--show", action="store_true")
    parser.add_argument("--failures", action="store_true", help="print the cases that failed")
    parser.add_argument("--model", action="append", default=[], help="a GGUF file to run instead (repeatable)")
    parser.add_argument(
        "--checks", action="store_true", help="log each check of the embedded model that changes an answer"
    )
    opts = parser.parse_args(argv)
    if opts.checks:  # (the decision's second question, a made-up or copied call, an answer written again)
        logging.basicConfig(format="  check: %(message)s")
        logging.getLogger("core.models.local").setLevel(logging.INFO)
    kinds = {k.strip() for k in opts.only.split(",") if k.strip()}
    cases = [
        c
        for c in CASES
        if (not kinds or c.kind in kinds)
        and re.search(opts.match, c.turns[-1], re.I)
        and (not opts.bot or c.bot == opts.bot)
    ]
    if opts.limit:  # the first ``limit`` of each kind
        cases = [c for n, c in enumerate(cases) if sum(d.kind == c.kind for d in cases[:n]) < opts.limit]
    tools = {c.tool for c in cases if c.tool}
    print(f"{len(cases)} cases over {len(tools)} of the bot's tools and outputs", flush=True)
    for name, model in models(opts.model, seed=opts.seed):
        warm = getattr(model, "warm", None)
        if warm is not None:  # as the bot does before it says it is ready (not counted in seconds per case)
            await warm()
        for number in range(opts.runs):
            label = f"run {number + 1}"
            if isinstance(model, LocalModel):  # each run samples anew: seed, seed + 1, ...
                model.seed = opts.seed + number
                label += f", seed {model.seed}"
            outcomes = await run(model, cases, show=opts.show)
            for bot_name in dict.fromkeys(c.bot for c in cases):  # each bot's figures apart: the planner's compare
                mine = [o for o in outcomes if o.case.bot == bot_name]
                print(summary(f"{name}, {bot_name} ({label})", mine), flush=True)
            if opts.failures:
                print("\n".join(_failures(outcomes)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
