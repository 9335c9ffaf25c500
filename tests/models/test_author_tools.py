"""A bot author's own tools on the embedded model's prompt form (issue 38).

The author's bot (a todo list kept in its context's state and shown by its ``render``, a unit converter, an output
of its own) runs through ``create_agent`` on ``LocalModel`` with a scripted stand-in for llama.cpp's server: the
compact form is the model's choice, the grammar offers exactly the bot's actions and outputs, the call is built
from the action's schema, the state reaches the model, the result is answered, and the bot's output is used.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pydantic
import pytest

from core import Bot, ContextState, InMemoryStore, RunEventType, action, context, create_agent, escape_text, output
from core.models import LocalModel
from core.models.base import ToolSpec
from core.models.grammar import ToolCall, tool_call_start
from core.models.tool_routing import CONFIRM_DEMOS, CONFIRM_TASK, ROUTE_DEMOS
from core.parser import TagEnd, parse
from core.prompt import output_tools
from extensions.terminal import cli_extension, cli_session

from .test_tool_calls import FakeServer


class TodoArgs(pydantic.BaseModel):
    item: str = pydantic.Field(min_length=1)


class ConvertArgs(pydantic.BaseModel):
    value: float
    from_unit: str
    to_unit: str


def _add(args: TodoArgs, ctx: Any, agent: Any) -> dict[str, Any]:
    ctx.memory["todos"].append(args.item)
    return {"added": args.item, "items_now": len(ctx.memory["todos"])}


def _convert(args: ConvertArgs, ctx: Any, agent: Any) -> dict[str, Any]:
    return {"value": round(args.value * 0.621371, 2), "unit": args.to_unit}


def _render(state: ContextState[Any]) -> str:
    return "Todo list:\n" + "\n".join(f"- {escape_text(t)}" for t in state.memory["todos"])


shown: list[str] = []
todo_list = output(
    type="todo:list",
    description="Shows the whole todo list.",
    handler=lambda text, ctx, agent: shown.append(text),
)
planner = context(
    type="planner",
    schema=str,
    key=lambda s: s,
    create=lambda state: {"todos": ["buy milk"]},
    render=_render,
    instructions="Keep answers short.",
)


def the_bot() -> Bot:
    return Bot(
        name="planner",
        persona="You are Plan.",
        instructions="Add what they ask to the list with add_todo.",
        context=planner,
        actions=[
            action(name="add_todo", description="Adds a todo.", schema=TodoArgs, handler=_add),
            action(name="convert", description="Converts units.", schema=ConvertArgs, handler=_convert),
        ],
        outputs=[todo_list],
    )


def scripted(
    tmp_path: Path, script: dict[str, tuple[str, str]], *, declined: frozenset[str] = frozenset()
) -> LocalModel:
    """``script``: the person's message -> (the tool the decision names, what the call or answer writes); the
    second question about an output answers no for the messages ``declined``, else yes."""

    def reply(body: dict[str, Any]) -> str:
        # (a call's body ends with its start, prefilled: the person's message is the one before it)
        last = str(next(m["content"] for m in reversed(body["messages"]) if m["role"] != "assistant"))
        if body["max_tokens"] == 16:  # the decision: the message after the bot's tools
            return script[last.rpartition("\nMessage: ")[2]][0]
        if body["max_tokens"] == 2:  # the second question: does the message ask for the output named?
            return "no" if last.rpartition("\nMessage: ")[2].partition("\n")[0] in declined else "yes"
        if "tools" in body:  # the call
            return script[last][1]
        if "(the result of" in last:  # the answer after a result
            return "Added it: you now have 2 items."
        if last in script and ":" in script[last][0]:  # the plain answer an output of text is written with
            return script[last][1]
        return "Hello!"

    model = LocalModel(model_path=tmp_path / "model.gguf", threads=1)
    model.calls_tools = True
    model._server = FakeServer(reply)
    return model


async def _say(agent: Any, text: str) -> list[Any]:
    events = agent.stream(cli_session, "s", {"type": "cli:message", "data": text}, reasoning=False)
    return [event async for event in events]


async def test_an_author_s_actions_and_output_reach_the_embedded_model_as_its_grammar(tmp_path: Path) -> None:
    add = '<tool_call>\n{"name": "add_todo", "arguments": {"item": "water the plants"}}\n</tool_call>'
    show = "1. buy milk <b>&\n2. water the plants"
    model = scripted(
        tmp_path,
        {
            "Add water the plants to my list.": ("add_todo", add),
            "Show my list.": ("todo:list", show),
            "Hi!": ("none", ""),
        },
    )
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    assert agent.compact_prompt is True, "the model's preference: no option needed"
    shown.clear()
    async with agent:
        added = await _say(agent, "Add water the plants to my list.")
        listed = await _say(agent, "Show my list.")
        greeted = await _say(agent, "Hi!")
    decide, call, answer, decide2, confirm2, listing, decide3, plain = model._server.bodies

    # the decision offers exactly the bot's actions and output (the platform's reply is the plain answer)
    assert decide["grammar"] == 'root ::= "add_todo" | "convert" | "todo:list" | "none"\n'
    assert decide["messages"][-1]["content"] == (
        "Tools:\n- add_todo(item): Adds a todo.\n- convert(value, from_unit, to_unit): Converts units.\n"
        "- todo:list(text): Shows the whole todo list.\n- none: no tool.\nMessage: Add water the plants to my list."
    ), "the bot's tools in its order"
    # the call: the action's schema as the grammar, the tool listed by the chat template
    assert [t["function"]["name"] for t in call["tools"]] == ["add_todo"]
    assert call["messages"][-1] == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "add_todo", "arguments": {"item":',
    }
    assert call["grammar"].startswith("root ::= args-1 ws") and "args-1 ::= ws json-text" in call["grammar"]
    assert "todo:list" not in call["grammar"]
    (result,) = [e.content for e in added if e.type == RunEventType.TOOL_CALL_RESULT]
    assert result["result"] == {"added": "water the plants", "items_now": 2}
    # the state the bot keeps reaches the model (its render and its instructions), and the result is answered
    system = answer["messages"][0]["content"]
    assert system.startswith("You are Plan.")
    assert "Keep answers short." in system and "Todo list:\n- buy milk\n- water the plants" in system
    assert "Add what they ask to the list with add_todo." in system  # the bot's own instructions too
    assert "You did what the last message asked with a tool." in system and "refuse" not in system
    assert "added: water the plants, items_now: 2" in answer["messages"][-1]["content"]
    assert [e.content for e in added if e.final] == ["Added it: you now have 2 items."]

    # the bot's own output, once the second question confirms it: an output of text alone is the plain answer (in
    # the conversation's slot, from the state it shows), delivered to it
    assert decide2["grammar"] == decide["grammar"]
    assert confirm2["grammar"] == 'root ::= "yes" | "no"\n' and confirm2["id_slot"] == decide2["id_slot"]
    assert confirm2["messages"][-1]["content"] == (
        "Tool: todo:list(text): Shows the whole todo list.\nEarlier: Add water the plants to my list.\n"
        "Message: Show my list.\nDoes the message ask for this tool?"
    ), "with the person's line before it, as the decision has"
    assert "tools" not in listing and "grammar" not in listing and listing["id_slot"] == plain["id_slot"]
    assert listing["messages"][-1] == {"role": "user", "content": "Show my list."}
    finals = [(e.output_type, e.content) for e in listed if e.final]
    assert finals == [("todo:list", "1. buy milk <b>&\n2. water the plants")]
    assert shown == ["1. buy milk <b>&\n2. water the plants"]

    # no tool: the plain answer goes to the platform's reply, not to the bot's output
    assert decide3["messages"][-1]["content"].endswith("\nMessage: Hi!") and "tools" not in plain
    assert "Reply to the last message directly and helpfully" in plain["messages"][0]["content"]
    assert [(e.output_type, e.content) for e in greeted if e.final] == [("cli:message", "Hello!")]


async def test_an_output_whose_plain_answer_refuses_is_written_as_a_call(tmp_path: Path) -> None:
    """The plain answer an output of text is written with refused ("Show me my bookings." -> "I'm sorry, but I
    can't assist with that request."): the output is written as a call instead, its text under its grammar."""
    asked = "Show my list."
    model = scripted(tmp_path, {asked: ("todo:list", "I'm sorry, but I can't assist with that request.")})
    plain = model._server.reply
    call = '{"name": "todo:list", "arguments": {"text": "1. buy milk"}}'
    model._server.reply = lambda body: call if "tools" in body else plain(body)
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    async with agent:
        events = await _say(agent, asked)
    *_, answer, written = model._server.bodies
    assert "tools" not in answer and [t["function"]["name"] for t in written["tools"]] == ["todo:list"]
    assert [(e.output_type, e.content) for e in events if e.final] == [("todo:list", "1. buy milk")]


async def test_an_output_the_second_question_declines_gets_the_plain_reply(tmp_path: Path) -> None:
    asked = "How many items are on my list?"
    model = scripted(
        tmp_path,
        {asked: ("todo:list", "You have 1 item.")},
        declined=frozenset([asked]),
    )
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    shown.clear()
    async with agent:
        events = await _say(agent, asked)
    decide, confirm, plain = model._server.bodies
    assert decide["max_tokens"] == 16 and confirm["max_tokens"] == 2
    assert "tools" not in plain and plain["id_slot"] == 0, "the plain reply in the conversation's slot, no call"
    assert [(e.output_type, e.content) for e in events if e.final] == [("cli:message", "You have 1 item.")]
    assert not shown and not [e for e in events if e.type == RunEventType.TOOL_CALL]


async def test_an_action_the_decision_names_is_called_without_a_second_question(tmp_path: Path) -> None:
    add = '<tool_call>\n{"name": "add_todo", "arguments": {"item": "water the plants"}}\n</tool_call>'
    asked = "Add water the plants to my list."
    model = scripted(tmp_path, {asked: ("add_todo", add)}, declined=frozenset([asked]))
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    async with agent:
        events = await _say(agent, asked)
    assert [body["max_tokens"] for body in model._server.bodies][:1] == [16]
    assert all(body["max_tokens"] != 2 for body in model._server.bodies), "an action is not asked twice"
    assert [e.content["name"] for e in events if e.type == RunEventType.TOOL_CALL] == ["add_todo"]


class Doubting(FakeServer):
    """Answers the second question with the probabilities llama.cpp gives when asked (``logprobs``): yes at
    ``yes`` for every message."""

    def __init__(self, reply: Any, *, yes: float) -> None:
        super().__init__(reply)
        self.yes = yes

    def handle_chat_completions(self, body: dict[str, Any], on_chunk: Any) -> None:
        if body["max_tokens"] != 2:  # (not the second question)
            return super().handle_chat_completions(body, on_chunk)
        self.bodies.append(body)
        tops = [{"token": "yes", "logprob": math.log(self.yes)}, {"token": "no", "logprob": math.log(1 - self.yes)}]
        answer = "yes" if self.yes > 0.5 else "no"
        content = [{"token": answer, "logprob": max(t["logprob"] for t in tops), "top_logprobs": tops}]
        on_chunk({"choices": [{"message": {"content": answer}, "logprobs": {"content": content}}]})


@pytest.mark.parametrize(("yes", "shown"), [(0.9, True), (0.64, False), (0.4, False)])
async def test_an_output_is_shown_when_its_yes_is_twice_as_likely_as_no(
    tmp_path: Path, yes: float, shown: bool
) -> None:
    asked = "What is a fair way to keep a list?"
    model = scripted(tmp_path, {asked: ("todo:list", "1. buy milk")})
    model._server = Doubting(model._server.reply, yes=yes)
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    async with agent:
        events = await _say(agent, asked)
    confirm = model._server.bodies[1]
    assert confirm["max_tokens"] == 2 and confirm["logprobs"] and confirm["id_slot"] in model._deciding
    finals = [(e.output_type, e.content) for e in events if e.final]
    assert finals == [("todo:list" if shown else "cli:message", "1. buy milk")], "the same answer, shown or not"


@pytest.mark.parametrize(("yes", "called"), [(0.8, True), (0.7, False), (0.3, False)])
async def test_an_action_named_for_a_remark_is_called_when_its_yes_is_three_times_as_likely_as_no(
    tmp_path: Path, yes: float, called: bool
) -> None:
    said = "I wrote a note about the recipe for lasagna."
    add = '<tool_call>\n{"name": "add_todo", "arguments": {"item": "the recipe for lasagna"}}\n</tool_call>'
    model = scripted(tmp_path, {said: ("add_todo", add)})
    model._server = Doubting(model._server.reply, yes=yes)
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    async with agent:
        events = await _say(agent, said)
    confirm = model._server.bodies[1]
    assert confirm["max_tokens"] == 2 and confirm["messages"][-1]["content"].startswith("Tool: add_todo(item)")
    calls = [e.content["name"] for e in events if e.type == RunEventType.TOOL_CALL]
    assert calls == (["add_todo"] if called else [])


class Weighing(FakeServer):
    """Answers the decision with the probabilities llama.cpp gives when asked (``logprobs``): the first token of
    the tool the script names (``add``) at ``likely``, ``none`` at ``none``."""

    def __init__(self, reply: Any, *, likely: float, none: float) -> None:
        super().__init__(reply)
        self.likely, self.none = likely, none

    def handle_chat_completions(self, body: dict[str, Any], on_chunk: Any) -> None:
        if body["max_tokens"] != 16 or not body.get("logprobs"):
            return super().handle_chat_completions(body, on_chunk)
        self.bodies.append(body)
        answer = str(self.reply(body))
        tops = [
            {"token": answer.split("_")[0], "logprob": math.log(self.likely)},
            {"token": "none", "logprob": math.log(self.none)},
        ]
        content = [{"token": tops[0]["token"], "logprob": tops[0]["logprob"], "top_logprobs": tops}]
        on_chunk({"choices": [{"message": {"content": answer}, "logprobs": {"content": content}}]})


@pytest.mark.parametrize(
    ("asked", "likely", "called"),
    [
        ("Say hi to my friend Tom.", 0.546, False),  # no word of add_todo's, 2.6 times none: no tool
        ("Say hi to my friend Tom.", 0.7, True),  # 3.4 times none: the decision stands
        ("Buy bread for the todo list.", 0.4, True),  # a word of add_todo's ("todo"): the decision stands
    ],
)
async def test_an_action_that_shares_no_word_with_the_message_needs_the_decision_to_be_sure_of_it(
    tmp_path: Path, asked: str, likely: float, called: bool
) -> None:
    call = json.dumps({"name": "add_todo", "arguments": {"item": asked}})
    add = f"<tool_call>\n{call}\n</tool_call>"
    model = scripted(tmp_path, {asked: ("add_todo", add)})
    model._server = Weighing(model._server.reply, likely=likely, none=0.208)
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    async with agent:
        events = await _say(agent, asked)
    assert model._server.bodies[0]["logprobs"], "the decision is asked with its probabilities"
    calls = [e.content["name"] for e in events if e.type == RunEventType.TOOL_CALL]
    assert calls == (["add_todo"] if called else [])


class Asking(Weighing):
    """``Weighing``'s decision, and the second question answered yes at ``yes`` (``Doubting``'s)."""

    def __init__(self, reply: Any, *, likely: float, none: float, yes: float) -> None:
        super().__init__(reply, likely=likely, none=none)
        self.doubting = Doubting(reply, yes=yes)
        self.doubting.bodies = self.bodies

    def handle_chat_completions(self, body: dict[str, Any], on_chunk: Any) -> None:
        if body["max_tokens"] == 2:
            return self.doubting.handle_chat_completions(body, on_chunk)
        return super().handle_chat_completions(body, on_chunk)


@pytest.mark.parametrize(
    ("asked", "yes", "called", "confirmed"),
    [
        ("Say hi to my friend Tom.", 0.54, False, True),  # sure at the decision, 1.2 times no at the second question
        ("Say hi to my friend Tom.", 0.75, True, True),  # 3 times no: called
        ("Multiply the recipe by two for me.", 0.78, True, True),
        ("How long is a mile in metres?", 0.3, True, False),  # a question: not asked again
    ],
)
async def test_a_request_that_shares_no_word_with_the_action_decided_is_asked_about_once_more(
    tmp_path: Path, asked: str, yes: float, called: bool, confirmed: bool
) -> None:
    name = "convert" if "?" in asked else "add_todo"
    arguments = {"value": 1, "from_unit": "mile", "to_unit": "metres"} if name == "convert" else {"item": asked}
    call = f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
    model = scripted(tmp_path, {asked: (name, call)})
    model._server = Asking(model._server.reply, likely=0.76, none=0.1, yes=yes)
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    async with agent:
        events = await _say(agent, asked)
    asked_again = [b for b in model._server.bodies if b["max_tokens"] == 2]
    assert len(asked_again) == int(confirmed)
    calls = [e.content["name"] for e in events if e.type == RunEventType.TOOL_CALL]
    assert calls == ([name] if called else [])


async def test_the_decision_lists_the_bot_s_tools_in_its_order_for_every_message(tmp_path: Path) -> None:
    lines = ("Convert 10 km to miles.", "Add 'water the plants' to my todo list.")
    model = scripted(tmp_path, {line: ("none", "") for line in lines})
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    async with agent:
        for line in lines:
            await _say(agent, line)
    asked = [str(b["messages"][-1]["content"]) for b in model._server.bodies if b["max_tokens"] == 16]
    listed = [question.partition("\nMessage: ")[0] for question in asked]
    assert len(listed) == 2 and listed[0] == listed[1], "the same list before each message: it stays cached"
    names = [line.partition("(")[0].removeprefix("- ") for line in listed[0].splitlines()[1:]]
    assert names == ["add_todo", "convert", "todo:list", "none: no tool."], "the bot's order, not the message's"


@pytest.mark.parametrize(
    ("said", "claims", "called", "answer"),
    [
        # a request the decision and the second question let pass, answered as if done: the action is called
        ("Please add call the bank.", "I added call the bank to my list.", True, "Added it: you now have 2 items."),
        # a remark: nothing is called, and what the answer claims is cut
        ("I bought milk today.", "Nice! I added milk to your list.", False, "Nice!"),
        # a request whose call gives what the person did not say: not called either
        ("Please add it.", "I added call the bank to my list. Anything else?", False, "Anything else?"),
        # an answer that claims nothing is left as it is
        ("Please add call the bank.", "Which bank?", False, "Which bank?"),
    ],
)
async def test_a_plain_answer_that_claims_an_action_nobody_called_is_not_given(
    tmp_path: Path, said: str, claims: str, called: bool, answer: str
) -> None:
    """The tutorial's bot on the embedded model, asked "Please add call the bank." after a first item, decided on
    no tool and answered "I added `call the bank` to my list.": nothing was added."""
    add = '<tool_call>\n{"name": "add_todo", "arguments": {"item": "call the bank"}}\n</tool_call>'
    model = scripted(tmp_path, {said: ("none", add)}, declined=frozenset({said}))
    scripted_reply = model._server.reply

    def reply(body: dict[str, Any]) -> str:
        last = str(body["messages"][-1]["content"])
        if body["max_tokens"] in (2, 16) or "tools" in body or "(the result of" in last:
            return scripted_reply(body)
        return claims

    model._server.reply = reply
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    async with agent:
        events = await _say(agent, said)
    calls = [e.content["name"] for e in events if e.type == RunEventType.TOOL_CALL]
    assert calls == (["add_todo"] if called else [])
    assert [e.content for e in events if e.final] == [answer]
    again = [b for b in model._server.bodies if "tools" not in b and b["max_tokens"] not in (2, 16)][1:]
    if not called and answer != claims:  # written once more without sampling
        assert [b["temperature"] for b in again] == [0.0]


def test_the_second_question_s_examples_are_the_decision_s_each_with_one_tool() -> None:
    assert len(CONFIRM_DEMOS) == len(ROUTE_DEMOS)
    for (tool, earlier, text, answer), (tools, before, message, name) in zip(CONFIRM_DEMOS, ROUTE_DEMOS, strict=True):
        assert (earlier, text) == (before, message) and tool in tools
        assert answer == ("no" if name == "none" else "yes")
        assert name == "none" or tool[0].startswith(f"{name}(")
    assert {answer for *_, answer in CONFIRM_DEMOS} == {"yes", "no"}


def test_an_output_with_attributes_is_a_tool_whose_call_writes_the_output() -> None:
    class Mood(pydantic.BaseModel):
        mood: str = pydantic.Field(json_schema_extra={"enum": ["happy", "sad"]})
        size: int = 1

    card = output(type="card", description="A card.", attributes=Mood)
    (tool,) = output_tools([card])
    assert tool == ToolSpec(
        name="card",
        description="A card.",
        parameters={
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1},
                "mood": {"type": "string", "enum": ["happy", "sad"]},
                "size": {"type": "integer", "default": 1},
            },
            "required": ["text", "mood"],
        },
        output="text",
    )
    xml = ToolCall(name="card", arguments={"text": "a </output> b", "mood": 'x"y', "size": 2, "bad key": 1}).as_output(
        "text"
    )
    (end,) = [e for e in parse(xml) if isinstance(e, TagEnd) and e.name == "output"]
    assert end.attrs == {"type": "card", "mood": 'x"y', "size": "2"}
    assert end.content == "a </output> b"
    assert json.loads(json.dumps(end.attrs))  # plain strings


async def test_warming_up_evaluates_the_first_message_s_prompts_and_claims_no_slot(tmp_path: Path) -> None:
    model = scripted(tmp_path, {"Hello!": ("none", "")})
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    from bots.warmup import first_request

    request = await first_request(agent)
    assert request is not None and [t.name for t in request.tools] == ["add_todo", "convert", "todo:list"]
    await model.warm(request)
    decide, plain, call = model._server.bodies
    assert all(body["max_tokens"] == 1 for body in model._server.bodies)
    assert call["id_slot"] == 1 and call["messages"][:-1] == plain["messages"] and call["tools"], "where calls go"
    assert call["messages"][-1] == {"role": "assistant", "content": tool_call_start(request.tools[0])[0]}
    assert decide["messages"][-1]["content"].endswith("\nMessage: Hello!")
    assert plain["id_slot"] == 0 and "Todo list:\n- buy milk" in plain["messages"][0]["content"]
    assert not model._slot_of, "no conversation holds a slot"
    await model.warm()  # without a request: the worked examples any bot's tools are decided after
    (demos,) = model._server.bodies[3:]
    assert demos["messages"][:-1] == decide["messages"][:-1]


async def test_warming_up_copies_the_first_slots_into_every_other_deciding_conversation_and_scratch_slot(
    tmp_path: Path,
) -> None:
    """Issue 55: with several slots, the first conversation's decision and system prompt are evaluated once, and
    every other deciding slot, free conversation slot and scratch slot (where tool calls and summaries are written)
    gets a copy: four people's first messages at once all find them evaluated, without evaluating them again."""
    model = scripted(tmp_path, {"Hello!": ("none", "")})
    model.slots, model.helpers = 3, 2
    model._slot_dir = tmp_path  # (as ``_load`` makes it)
    actions: list[tuple[int, str, str]] = []
    model._slot_action = lambda server, slot, action, name: actions.append((slot, action, name))  # type: ignore[method-assign]
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    from bots.warmup import first_request

    request = await first_request(agent)
    assert request is not None
    await model.warm(request)
    assert [body["id_slot"] for body in model._server.bodies] == [5, 0, 3, 6], "and the second question"
    second = model._server.bodies[3]
    assert second["grammar"] == 'root ::= "yes" | "no"\n' and second["messages"][0]["content"] == CONFIRM_TASK
    assert actions == [
        (3, "save", "slot-3.bin"),
        (4, "restore", "slot-3.bin"),
        (0, "save", "slot-0.bin"),
        (1, "restore", "slot-0.bin"),
        (2, "restore", "slot-0.bin"),
    ]
    assert not model._slot_of and all(body["max_tokens"] == 1 for body in model._server.bodies)
    tool = request.tools[-1]  # (an output: the second question is asked of it)
    await model._confirmed(model._server, request, tool)
    assert model._server.bodies[-1]["id_slot"] == 6, "asked where its examples were warmed"


async def test_a_slot_copy_that_fails_leaves_the_slots_cold_and_the_model_ready(tmp_path: Path) -> None:
    """llama.cpp refusing a slot action (an older build, a full disk) costs the other slots their warmth, nothing
    more: warming ends and the model answers."""
    model = scripted(tmp_path, {"Hello!": ("none", ""), "Hi!": ("none", "")})
    model.slots, model.helpers = 2, 1
    model._slot_dir = tmp_path

    def refuse(server: Any, slot: int, action: str, name: str) -> None:
        raise ValueError("This server does not support slots action")

    model._slot_action = refuse  # type: ignore[method-assign]
    agent = create_agent(model=model, bot=the_bot(), extensions=[cli_extension()], memory=InMemoryStore())
    from bots.warmup import first_request

    await model.warm(await first_request(agent))
    events = await _say(agent, "Hi!")
    assert "Hello!" in "".join(str(e.content) for e in events if e.type == RunEventType.OUTPUT_TEXT_DONE)
