"""Run events (seed: Ailoy response format): is_type_switched, the final event's one shape, and deltas with
their templates resolved (``TemplateStream``, tested with the same text cut at every position)."""

from __future__ import annotations

from typing import Any

import pytest

from core import RunEvent, RunEventType, ScriptedModel, context, create_agent, output
from core.errors import TemplateError
from core.events import NOT_DELIVERED, EventEmitter
from core.templates import TemplateStream

T = RunEventType


def emitter() -> tuple[EventEmitter, list[RunEvent]]:
    events: list[RunEvent] = []
    em = EventEmitter("chat:u")
    em.listeners.append(events.append)
    em.step = 1
    return em, events


def test_each_new_output_starts_a_new_item_and_a_new_type_switches() -> None:
    em, events = emitter()
    em.emit(T.REASONING, "hm")
    em.emit(T.REASONING, "m")
    em.emit(T.OUTPUT_TEXT, "on", output_index=1)
    em.emit(T.OUTPUT_TEXT, "e", output_index=1)
    em.emit(T.OUTPUT_TEXT_DONE, "one", output_index=1)
    em.emit(T.OUTPUT_TEXT, "tw", output_index=2)
    em.emit(T.OUTPUT_TEXT, "o", output_index=2)
    em.step = 2
    em.emit(T.OUTPUT_TEXT, "again", output_index=2)  # same index, next step: a new output
    em.emit(T.TOOL_CALL, {"id": "1", "name": "a", "arguments": "{}"})
    em.emit(T.TOOL_CALL, {"id": "2", "name": "b", "arguments": "{}"})
    em.emit(T.TOOL_CALL_RESULT, {"id": "1", "name": "a", "result": 1})
    literal = [True, False, True, False, True, True, False, False, True, False, True]
    assert [e.is_type_switched for e in events] == literal
    boxes = [True, False, True, False, False, True, False, True, True, True, True]
    assert [e.new_item for e in events] == boxes
    assert [e.role for e in events][-3:] == ["assistant", "assistant", "tool"]


def test_the_final_event_is_always_text_and_an_undelivered_output_says_why() -> None:
    em, events = emitter()
    em.emit(T.OUTPUT_TEXT_DONE, "hello", output_index=0)
    em.emit(T.OUTPUT_TEXT_DONE, None, output_index=1)
    em.emit(T.OUTPUT_TEXT_DONE, None, output_index=2, error="bad template")
    em.emit(T.OUTPUT_TEXT_DONE, {"a": 1}, output_index=3)
    assert [(e.content, e.error) for e in events] == [
        ("hello", None),
        ("", NOT_DELIVERED),
        ("", "bad template"),
        ("{'a': 1}", None),
    ]
    assert all(isinstance(e.content, str) and e.final and not e.new_item for e in events)


def test_nobody_listening_costs_nothing_but_keeps_the_state() -> None:
    em = EventEmitter("c")
    em.emit(T.OUTPUT_TEXT, "a", output_index=0)
    events: list[RunEvent] = []
    em.listeners.append(events.append)
    em.emit(T.OUTPUT_TEXT, "b", output_index=0)
    assert events[0].is_type_switched is False


async def test_a_run_streams_two_outputs_each_starting_a_box() -> None:
    chat = context(type="chat", schema=str, key=lambda s: s)
    model = ScriptedModel(
        ['<response><output type="m">one</output><output type="m">two</output><output type="x">?</output></response>'],
        chunk_size=3,
    )
    agent = create_agent(model=model, contexts=[chat], outputs=[output(type="m")])
    async with agent:
        events = [e async for e in agent.stream(chat, "u", {"type": "m", "data": "hi"})]
    texts = [e for e in events if e.type in (T.OUTPUT_TEXT, T.OUTPUT_TEXT_DONE)]
    firsts: dict[Any, RunEvent] = {}
    for e in texts:
        if not e.final:
            firsts.setdefault(e.output_index, e)
    assert len(firsts) == 3 and all(e.is_type_switched and e.new_item for e in firsts.values())
    finals = [e for e in texts if e.final]
    assert [(e.content, e.error is None) for e in finals] == [("one", True), ("two", True), ("", False)]


# -- templates in deltas ---------------------------------------------------------------------------------------


VALUES = {"calls[0].sum": 3, "calls[0].name": "Ada", "calls[1]": {"a": [1]}, 'calls[0]["x y"]': "q"}


async def lookup(expr: str) -> Any:
    if expr not in VALUES:
        raise TemplateError(f"{{{{{expr}}}}} unknown")
    return VALUES[expr]


CASES = [
    ("sum={{calls[0].sum}}.", "sum=3."),
    ("{{ calls[0].name }} has {{calls[1]}}", 'Ada has {"a": [1]}'),
    ('{{calls[0]["x y"]}}', "q"),
    ("a { b } {c} {{ not a template }} done", "a { b } {c} {{ not a template }} done"),
    ("missing {{calls[9].x}} left out", "missing  left out"),
    ("unclosed {{calls[0].sum and more", "unclosed {{calls[0].sum and more"),
    ("braces at the end {", "braces at the end {"),
    ("{{calls[0].sum}}{{calls[0].name}}", "3Ada"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
async def test_deltas_carry_resolved_templates_wherever_the_text_is_cut(text: str, expected: str) -> None:
    for cut in range(len(text) + 1):
        for second in range(cut, len(text) + 1):
            stream = TemplateStream(lookup)
            pieces = [await stream.feed(p) for p in (text[:cut], text[cut:second], text[second:])]
            pieces.append(await stream.close())
            assert "".join(pieces) == expected, (cut, second)
            if "{{calls" in expected:
                continue
            assert not any("{{calls" in p for p in pieces), (cut, second)


async def test_text_before_a_template_is_not_held_back() -> None:
    stream = TemplateStream(lookup)
    assert await stream.feed("Hello {") == "Hello "
    assert await stream.feed("{calls[0].na") == ""
    assert await stream.feed("me}} and") == "Ada and"


async def test_a_long_run_of_text_after_braces_is_given_back() -> None:
    stream = TemplateStream(lookup, limit=10)
    assert await stream.feed("{{" + "x" * 20) == "{{" + "x" * 20
