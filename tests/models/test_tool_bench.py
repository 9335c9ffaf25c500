"""bench/tools.py measures the embedded model on an author's tools (issue 48): next to the project's own planner bot,
a bot of another author's style, an expense splitter (numbers, people's names, an output of its own), has cases of
its own, run with its own bot and summed apart. Here the harness runs with a scripted model that calls each case's
expected tool (a benchmark asserts nothing; this checks its wiring, not a model)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from core import ModelRequest, ScriptedModel

BENCH = Path(__file__).resolve().parents[2] / "bench" / "tools.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tools", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_tools"] = module
    spec.loader.exec_module(module)
    return module


SPLITTER_CALLS = {
    "Ana paid 30 euros for dinner.": ("add_expense", {"payer": "Ana", "amount": 30, "what": "dinner"}),
    "Who owes whom?": ("balance", {}),
}


def answer(request: ModelRequest) -> str:
    """The expected call for the two splitter lines it knows, until its result is in the prompt; then the reply."""
    for line, (name, args) in SPLITTER_CALLS.items():
        if line in request.prompt and "<action_result" not in request.prompt:
            return f'<response><action_call name="{name}">{json.dumps(args)}</action_call></response>'
    said = "Carla owes 14.00; recorded Ana's 30.00 for dinner."
    return f'<response><output type="cli:message">{said}</output></response>'


async def test_the_tool_bench_runs_the_splitter_bot_next_to_the_planner() -> None:
    tools = bench()
    splitter = [c for c in tools.CASES if c.bot == "splitter"]
    assert {c.tool for c in splitter} >= {"add_expense", "balance", "splitter:summary", None}
    assert {c.kind for c in splitter} == {"obvious", "choice", "earlier", "none"}
    assert tools.BOTS["splitter"]().name == "splitter" and tools.BOTS["planner"]().name == "planner"
    chosen = [c for c in splitter if c.turns[-1] in SPLITTER_CALLS or c.tool is None]
    planner_none = next(c for c in tools.CASES if c.bot == "planner" and c.tool is None)
    cases: list[Any] = [planner_none, *chosen]
    outcomes = await tools.run(ScriptedModel(answer), cases)
    assert [o.case for o in outcomes] == cases
    by_line = {o.case.turns[-1]: o for o in outcomes}
    for line in SPLITTER_CALLS:
        assert by_line[line].valid and by_line[line].accurate and by_line[line].used, by_line[line]
    line = tools.summary("scripted, splitter", [o for o in outcomes if o.case.bot == "splitter"])
    assert "right tool with valid args 2/2 (100%)" in line and "no tool on no-tool messages 3/3" in line, line


TABLES_CALLS = {
    "Cancel booking number 1.": ("cancel_booking", {"booking_id": 1}),
    "Is there a free table for 6 people on 2026-06-16?": ("availability", {"date": "2026-06-16", "guests": 6}),
}


def tables_answer(request: ModelRequest) -> str:
    """The expected call for the two bookings lines it knows, until its result is in the prompt; then the reply."""
    for line, (name, args) in TABLES_CALLS.items():
        if line in request.prompt and "<action_result" not in request.prompt:
            return f'<response><action_call name="{name}">{json.dumps(args)}</action_call></response>'
    said = "Booking 1 is cancelled; on 2026-06-16 there is room at 12:00, 13:30, 19:00 and 21:00."
    return f'<response><output type="cli:message">{said}</output></response>'


async def test_the_tool_bench_runs_the_tables_bot_with_dates_and_enums() -> None:
    """The third bot (issue 55): its tools take a date, a time, a count and an enum; its cases run on its own bot."""
    tools = bench()
    tables = [c for c in tools.CASES if c.bot == "tables"]
    assert {c.tool for c in tables} >= {"book_table", "cancel_booking", "availability", "tables:bookings", None}
    assert {c.kind for c in tables} == {"obvious", "choice", "earlier", "none"}
    schema = json.dumps([a.schema.json_schema for a in tools.TABLES_ACTIONS])
    assert '"format": "date"' in schema and '"format": "time"' in schema and '"enum"' in schema
    chosen = [c for c in tables if c.turns[-1] in TABLES_CALLS or c.tool is None]
    outcomes = await tools.run(ScriptedModel(tables_answer), chosen)
    by_line = {o.case.turns[-1]: o for o in outcomes}
    for line in TABLES_CALLS:
        assert by_line[line].valid and by_line[line].accurate and by_line[line].used, by_line[line]
    line = tools.summary("scripted, tables", outcomes)
    assert "right tool with valid args 2/2 (100%)" in line and "no tool on no-tool messages 4/4" in line, line


def test_the_summary_counts_answers_in_the_third_person_and_the_result_given_as_the_answer() -> None:
    """ "result used" counts the result itself (``Done: ...``, given when the model's answer showed nothing of it) as
    used, and says nothing of an answer speaking of the person instead of to them: both are counted apart (issue 55,
    where a prompt's wording moved them and not the bench's other figures)."""
    tools = bench()
    case = next(c for c in tools.CASES if c.bot == "tables" and c.tool == "cancel_booking")
    said = (
        "Booking 1 is cancelled.",
        "The person cancelled booking number 1.",
        "Done: cancelled: 1",
        "Ben owes them 3, and she paid.",
    )
    outcomes = [
        tools.Outcome(case=case, answer=text, calls=[("cancel_booking", "{}")], results=[("cancel_booking", True)])
        for text in said
    ]
    line = tools.summary("scripted, tables", outcomes)
    assert "| in the third person 1 |" in line and "| the result itself as the answer 1 |" in line, line
