"""The layer under the step loop: the reference grammar, calls as a dependency graph (plans, deferred
references, cycles) and instanced copies with their workspaces. No timings: concurrency is shown by calls
that could only finish if they ran at the same time."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from core.dataflow import (
    CallSlot,
    PlanStep,
    ResponseCalls,
    Workspace,
    current_workspace,
    instances,
    run_instances,
    run_plan,
    settle,
)
from core.errors import ActionError, TemplateError, ValidationError
from core.references import Target, prepare_call, save_result, view
from core.schema import as_schema
from core.statelog import StateLog, choose_targets, evaluate, find_refs, parse_expr, parse_path, substitute

# -- the grammar -------------------------------------------------------------------------------------------------


def test_expressions_parse_with_and_binding_tighter_than_or() -> None:
    a, b, c = ("state", "a"), ("state", "b"), ("state", "c")
    assert parse_expr("†state.a") == ((a,),)
    assert parse_expr(" †state.a&&†state.b || †state.c ") == ((a, b), (c,))
    for bad in ("state.a", "†state.a ||", "†state.a | †state.b", "†a && x", ""):
        with pytest.raises(ValidationError, match="not a state path or expression"):
            parse_expr(bad)


def test_find_refs_sees_expressions_and_paths_inside_text_but_not_output_paths() -> None:
    value = {
        "a": "†state.x || †data.y",
        "b": ["Hello †state.user.name, and †state.z.", "no refs", 3],
        "_outputPath": "†state.out",
    }
    assert list(find_refs(value)) == [
        ("state", "x"),
        ("data", "y"),
        ("state", "user", "name"),
        ("state", "z"),
    ]


def lookup_in(values: dict[str, Any]) -> Any:
    def lookup(path: tuple[str, ...]) -> tuple[bool, Any]:
        key = ".".join(path)
        return (key in values, values.get(key))

    return lookup


def test_evaluate_or_and_and() -> None:
    lookup = lookup_in({"s.a": None, "s.b": 2, "s.c": 3})
    assert evaluate(parse_expr("†s.a"), lookup) == (True, None)  # one path: as it is, even null
    assert evaluate(parse_expr("†s.a || †s.b"), lookup) == (True, 2)  # null is no value for ||
    assert evaluate(parse_expr("†s.b && †s.c"), lookup) == (True, 3)
    assert evaluate(parse_expr("†s.b && †s.x"), lookup) == (False, None)
    assert evaluate(parse_expr("†s.x && †s.b || †s.c"), lookup) == (True, 3)
    assert evaluate(parse_expr("†s.x || †s.y"), lookup) == (False, None)


def test_choose_targets() -> None:
    lookup = lookup_in({"s.a": 1})
    assert choose_targets(parse_expr("†s.a"), lookup) == (("s", "a"),)  # one path: written whatever is there
    assert choose_targets(parse_expr("†s.a && †s.b"), lookup) == (("s", "a"), ("s", "b"))
    assert choose_targets(parse_expr("†s.a || †s.b"), lookup) == (("s", "b"),)
    assert choose_targets(parse_expr("†s.a || †s.a && †s.b || †s.c"), lookup) == (("s", "c"),)
    assert choose_targets(parse_expr("†s.a || †s.a"), lookup) is None


def test_substitute_whole_values_keep_their_type_and_text_gets_their_text() -> None:
    lookup = lookup_in({"s.n": 3, "s.u": {"name": "Ada"}, "s.t": "x"})
    value = {"n": "†s.n", "t": "n=†s.n u=†s.u t=†s.t.", "l": ["†s.x || †s.n"], "_outputPath": "†s.n"}
    assert substitute(value, lookup) == {"n": 3, "t": 'n=3 u={"name": "Ada"} t=x.', "l": [3], "_outputPath": "†s.n"}
    with pytest.raises(TemplateError, match=r"†s\.x has no value"):
        substitute("a †s.x b", lookup)
    with pytest.raises(TemplateError, match="none of its alternatives"):
        substitute("†s.x || †s.y", lookup)


# -- calls as a graph -----------------------------------------------------------------------------------------------


def has(log: StateLog) -> Any:
    def has_value(path: tuple[str, ...]) -> bool:
        found, value = log.resolve(path)
        return found and value is not None

    return has_value


async def test_a_plan_runs_as_a_dependency_graph_in_any_order() -> None:
    """The model wrote the reader first: it waits for the writer; the two independent writers meet at a
    barrier, which they could only pass by running at the same time."""
    log = StateLog()
    barrier = asyncio.Barrier(2)
    order: list[str] = []

    def writer(name: str, path: str, value: Any) -> PlanStep:
        async def run(calls: ResponseCalls, index: int) -> Any:
            await barrier.wait()
            order.append(name)
            log.append(parse_path(path), value)
            return value

        return PlanStep(name=name, targets=(parse_path(path),), run=run)

    async def read(calls: ResponseCalls, index: int) -> Any:
        raw = {"text": "†state.a and †state.b"}
        prepared = await prepare_call(
            "read", as_schema(dict[str, Any], what="t"), raw, calls=calls, index=index, log=log
        )
        order.append("read")
        return prepared.copies[0]

    async with asyncio.timeout(5):
        calls = await run_plan(
            [PlanStep(name="read", run=read), writer("a", "†state.a", 1), writer("b", "†state.b", 2)]
        )
    assert calls[0].future.result() == {"text": "1 and 2"}
    assert order[-1] == "read" and set(order[:2]) == {"a", "b"}


async def test_an_existing_value_reads_what_earlier_calls_leave_not_later_ones() -> None:
    log = StateLog()
    log.append(("state", "x"), "old")

    async def read(calls: ResponseCalls, index: int) -> Any:
        await settle(calls, index, [("state", "x")], has(log))
        return log.resolve(("state", "x"))[1]

    def write(value: str) -> PlanStep:
        async def run(calls: ResponseCalls, index: int) -> Any:
            log.append(("state", "x"), value)
            return value

        return PlanStep(name=f"write {value}", targets=(("state", "x"),), run=run)

    async with asyncio.timeout(5):
        calls = await run_plan([write("first"), PlanStep(name="read", run=read), write("second")])
    assert calls[1].future.result() == "first"


async def test_a_deferred_reference_waits_for_calls_not_written_yet_until_the_response_closes() -> None:
    log = StateLog()
    calls = ResponseCalls([CallSlot("reader")])
    reader = asyncio.create_task(settle(calls, 0, [("state", "x")], has(log)))
    await asyncio.sleep(0)
    assert not reader.done()
    calls.append(CallSlot("other"))  # writes something else: still waiting
    await asyncio.sleep(0)
    assert not reader.done()
    writer = CallSlot("writer", targets=[("state", "x")])
    calls.append(writer)
    await asyncio.sleep(0)
    assert not reader.done()
    log.append(("state", "x"), 1)
    writer.set(1)
    async with asyncio.timeout(5):
        assert await reader == ""


async def test_closing_the_response_ends_the_wait_with_what_is_missing() -> None:
    calls = ResponseCalls([CallSlot("reader"), CallSlot("failed", targets=[("state", "y")])])
    calls[1].fail("boom")
    task = asyncio.create_task(settle(calls, 0, [("state", "x"), ("state", "y")], has(StateLog())))
    await asyncio.sleep(0)
    assert not task.done()
    calls.close()
    async with asyncio.timeout(5):
        note = await task
    assert "†state.x: nothing wrote it before, and no call of this response writes it" in note
    assert "†state.y: the call that writes it (failed) failed: boom" in note


async def test_a_plain_list_of_calls_does_not_wait_for_calls_to_come() -> None:
    note = await settle([CallSlot("reader")], 0, [("state", "x")], has(StateLog()))
    assert "no call of this response writes it" in note


async def test_a_cycle_fails_at_once_naming_the_calls() -> None:
    log = StateLog()

    def step(name: str, reads: str, writes: str) -> PlanStep:
        async def run(calls: ResponseCalls, index: int) -> Any:
            raw = {"v": reads}
            await prepare_call(name, as_schema(dict[str, Any], what="t"), raw, calls=calls, index=index, log=log)
            return "never"

        return PlanStep(name=name, targets=(parse_path(writes),), run=run)

    async with asyncio.timeout(5):
        calls = await run_plan([step("a", "†s.b", "†s.c"), step("b", "†s.c", "†s.d"), step("c", "†s.d", "†s.b")])
    errors = [c.error or "" for c in calls]
    assert any("wait for each other (" in e and "->" in e for e in errors)
    assert all(errors)


# -- instancing ---------------------------------------------------------------------------------------------------


def test_instances_lay_each_item_over_the_other_arguments() -> None:
    raw = {"city": "?", "units": "C", "_instances": [{"city": "Paris"}, {"city": "Oslo", "units": "F"}]}
    assert instances(raw) == [{"city": "Paris", "units": "C"}, {"city": "Oslo", "units": "F"}]
    assert "_instances" not in raw
    assert instances({"a": 1, "_instances": 2}) == [{"a": 1}, {"a": 1}]
    assert instances({"a": 1}) is None
    for bad in (True, 0, 99, [], [1], "x"):
        with pytest.raises(ValidationError, match="_instances"):
            instances({"_instances": bad})


async def test_copies_run_together_each_in_its_own_workspace_committed_in_copy_order() -> None:
    log = StateLog()
    log.append(("state", "seen"), ["base"])
    barrier = asyncio.Barrier(3)
    views: list[Any] = []

    async def copy(i: int, args: Any) -> Any:
        here = view(log)
        assert isinstance(here, Workspace) and here.index == i
        here.append(("state", "seen"), f"copy {i}", method="push")
        await barrier.wait()  # every copy has written: none sees another's write
        views.append((i, here.resolve(("state", "seen"))[1]))
        if i == 1:
            raise ValueError("copy 1 fails")
        return args * 10

    async with asyncio.timeout(5):
        outcomes, notes = await run_instances([1, 2, 3], copy, log)
    assert outcomes == [(10, None), (None, "copy 1 fails"), (30, None)]
    assert notes == []  # pushes to one list are no conflict
    assert sorted(views) == [(i, ["base", f"copy {i}"]) for i in range(3)]
    assert log.resolve(("state", "seen")) == (True, ["base", "copy 0", "copy 1", "copy 2"])
    assert current_workspace.get() is None
    assert view(log) is log


async def test_save_result_refuses_to_overwrite_when_every_alternative_is_taken() -> None:
    log = StateLog()
    target = Target(expr=parse_expr("†s.a || †s.b"), written="†s.a || †s.b")
    assert save_result(log, target, 1, call=None) == (("s", "a"),)
    assert save_result(log, target, 2, call=None) == (("s", "b"),)
    with pytest.raises(ActionError, match=re.escape("every alternative of †s.a || †s.b already holds a value")):
        save_result(log, target, 3, call=None)
    assert [e.data for e in log.entries] == [1, 2]
