"""The compact prompt with tools: the actions offered as tools, calls and results as turns, a window that stays put.

The prompt is what a small local model reads; the flow through the step loop needs the loop to hand the compact
prompt its actions (see core/engine.py), so these tests drive ``build_compact_prompt`` directly.
"""

from __future__ import annotations

import itertools
import json

from pydantic import BaseModel, Field

from core import action, context
from core.definitions import ContextState
from core.entries import ActionCall, ActionResult, InputRef, Log, OutputRef, WorkingMemory
from core.prompt import COMPACT_TOOLS_MAX, TOOL_RESULT_CHARS, build_compact_prompt


class TimeArgs(BaseModel):
    timezone: str = Field(default="UTC", title="Timezone", description="IANA time zone")


clock = action(
    name="current_time",
    description="The current <date> & time.",
    instructions="Use it for the date.",
    schema=TimeArgs,
    handler=lambda args, ctx, agent: {"iso": "2026-01-01T00:00:00Z"},
)
room = context(type="room", schema=str, key=lambda s: s)


def state_of(logs: list[Log]) -> ContextState:
    return ContextState(context=room, args="r", key="r", id="room:r", memory={}, working_memory=WorkingMemory(logs))


def test_actions_are_offered_as_tools_with_their_schema() -> None:
    new = [InputRef(type="room:message", text="What time is it?")]
    prompt = build_compact_prompt(state=state_of([]), outputs=[], updates=new, actions=[clock])
    (tool,) = prompt.tools
    assert tool.name == "current_time"
    assert tool.description == "The current &lt;date&gt; &amp; time. Use it for the date."
    assert tool.parameters == {
        "type": "object",
        "properties": {"timezone": {"type": "string", "default": "UTC", "description": "IANA time zone"}},
    }
    many = [action(name=f"a{n}", schema=TimeArgs, handler=lambda a, c, g: None) for n in range(20)]
    assert (
        len(build_compact_prompt(state=state_of([]), outputs=[], updates=new, actions=many).tools) == COMPACT_TOOLS_MAX
    )


def test_without_actions_there_are_no_tools_and_no_tool_turns() -> None:
    logs: list[Log] = [
        InputRef(type="room:message", text="Time?", processed=True),
        ActionCall(name="current_time", content="{}", processed=True),
        ActionResult(call_id="c", name="current_time", data={"iso": "x"}, processed=True),
        OutputRef(type="room:message", content="Midnight.", processed=True),
    ]
    prompt = build_compact_prompt(state=state_of(logs), outputs=[], updates=[])
    assert prompt.tools == () and prompt.turns == (("user", "Time?"), ("assistant", "Midnight."))


def test_a_call_and_its_result_are_turns_escaped_and_bounded() -> None:
    call = ActionCall(name="current_time", content='{"timezone": "Asia/Tokyo <b>"}', processed=True)
    logs: list[Log] = [InputRef(type="room:message", text="Time in Tokyo?", processed=True), call]
    result = ActionResult(call_id=call.id, name="current_time", text="<iso> " + "x" * 3000)
    prompt = build_compact_prompt(state=state_of(logs), outputs=[], updates=[result], actions=[clock])
    (user, called, answered) = prompt.turns
    assert user == ("user", "Time in Tokyo?")
    assert called[0] == "tool_call" and "<" not in called[1]
    assert json.loads(called[1]) == {"name": "current_time", "arguments": {"timezone": "Asia/Tokyo <b>"}}
    assert answered[0] == "tool" and answered[1].startswith("&lt;iso&gt; xxx") and answered[1].endswith(" [...]")
    assert len(answered[1]) < TOOL_RESULT_CHARS + 20
    failed = ActionResult(call_id=call.id, name="current_time", error="unknown time zone")
    prompt = build_compact_prompt(state=state_of(logs), outputs=[], updates=[failed], actions=[clock])
    assert prompt.turns[-1] == ("tool", "error: unknown time zone")
    # a result saved to the state (_outputPath): the note of where is for the full prompt, not the small model
    for text in ("buy milk (saved to †state.notes)", '{"at": "9:00"}\n(saved to †state.alarms[0] and †state.last)'):
        saved = ActionResult(call_id=call.id, name="current_time", text=text)
        prompt = build_compact_prompt(state=state_of(logs), outputs=[], updates=[saved], actions=[clock])
        assert "saved to" not in prompt.turns[-1][1] and prompt.turns[-1][1].startswith(text[:6])


def test_the_window_keeps_its_start_for_several_turns() -> None:
    """A window that slid at every turn would make a warm model evaluate the whole prompt again each time."""
    logs: list[Log] = []
    starts: list[str] = []
    for turn in range(60):
        logs.append(InputRef(type="room:message", text=f"message {turn}", processed=True))
        logs.append(OutputRef(type="room:message", content=f"answer {turn}", processed=True))
        new = [InputRef(type="room:message", text="and now?")]
        prompt = build_compact_prompt(state=state_of(logs), outputs=[], updates=new, history=6)
        messages = [t for t in prompt.turns if t[0] in ("user", "assistant")]
        assert len(messages) >= min(7, 2 * turn + 3) and len(messages) <= 3 * 6 + 1
        starts.append(prompt.turns[0][1])
    changes = sum(a != b for a, b in itertools.pairwise(starts))
    assert changes <= 25, f"the window's start changed {changes} times in 60 turns"
    assert prompt.turns[-2:] == (("assistant", "answer 59"), ("user", "and now?"))
