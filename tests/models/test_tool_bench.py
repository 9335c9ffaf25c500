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
