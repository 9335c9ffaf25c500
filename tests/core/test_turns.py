"""A reply ends where the model's turn ends: invented turns and stray protocol characters never reach the user."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core import AgentOptions, InMemoryStore, ScriptedModel, context, create_agent, output
from core.definitions import ContextState
from core.entries import InputRef, Log, OutputRef, WorkingMemory
from core.models import LocalModel, ModelRequest
from core.models.grammar import build_grammar
from core.prompt import build_compact_prompt
from core.turns import TURN_STOPS, TurnGuard, cut_turns
from extensions.terminal import chat, cli_extension

INVENTED = "Paris is the capital of France.\nuser: and Italy?\nyou: Rome.\nuser: thanks"


def streamed(text: str, size: int, names: tuple[str, ...] = ()) -> tuple[list[str], str]:
    guard = TurnGuard(names)
    parts = [guard.feed(text[i : i + size]) for i in range(0, len(text), size)]
    parts.append(guard.close())
    return parts, "".join(parts)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (INVENTED, "Paris is the capital of France.\n"),
        (">Hello! How can I help?", "Hello! How can I help?"),
        (" : > Hello", "Hello"),
        ("you: Hello there.", "Hello there."),
        ("Assistant: Hi!\nUser: hi\nAssistant: hello", "Hi!\n"),
        ("Hi!\n\n**User:** what now?", "Hi!\n\n"),
        ("Bonjour !<|im_end|>\n<|im_start|>user\nSalut", "Bonjour !"),
        ("Hallo!<end_of_turn>\n<start_of_turn>user", "Hallo!"),
        ("Sure.</output></response>", "Sure."),
        ("Ada: I invented Ada's line", "Ada: I invented Ada's line"),  # a first line is the reply, not a turn
        ("Note: a < b, and x > y.\nStep 1: breathe", "Note: a < b, and x > y.\nStep 1: breathe"),
        ("See https://example.org/a:b now", "See https://example.org/a:b now"),
        ("Three lines\nof a\npoem", "Three lines\nof a\npoem"),
    ],
)
@pytest.mark.parametrize("size", [1, 3, 1000])
def test_the_guard_cuts_invented_turns_and_protocol_characters(text: str, shown: str, size: int) -> None:
    _parts, whole = streamed(text, size)
    assert whole == shown == cut_turns(text)


def test_a_speaker_of_the_conversation_starts_a_turn_too() -> None:
    assert cut_turns("Nice to meet you, Ada.\nAda: thanks!", ["Ada"]) == "Nice to meet you, Ada.\n"
    assert cut_turns("Nice to meet you.\nAda: thanks!") == "Nice to meet you.\nAda: thanks!"


def test_nothing_invented_is_shown_even_for_a_moment() -> None:
    parts, _ = streamed(INVENTED, 1)
    shown = ""
    for part in parts:
        shown += part
        assert "user" not in shown and "Rome" not in shown


class Stream:
    """A model that streams a plain reply in small chunks and records whether the stream was closed early."""

    name = "stream"
    model = ""
    vision = False
    last_usage = None

    def __init__(self, text: str) -> None:
        self.text = text
        self.sent = 0
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        for i in range(0, len(self.text), 4):
            self.sent = i + 4
            yield self.text[i : i + 4]


async def test_a_plain_reply_becomes_the_output_and_the_generation_stops_at_an_invented_turn() -> None:
    model = Stream(INVENTED + "\n" + "more invented dialogue " * 50)
    said: list[str] = []
    room = context(type="room", schema=str, key=lambda s: s, max_steps=1)
    agent = create_agent(
        model=model,
        contexts=[room],
        outputs=[output(type="room:message", handler=lambda data, c, a: said.append(data))],
        memory=InMemoryStore(),
        options=AgentOptions(compact_prompt=True),
    )
    async with agent:
        await agent.send(room, "r", {"type": "room:message", "data": "What is the capital of France?"})
    assert said == ["Paris is the capital of France."]
    assert model.sent < len(INVENTED) + 8, "the stream was closed at the invented turn"
    request = model.requests[0]
    assert request.plain and request.stop == TURN_STOPS
    assert request.turns == (("user", "What is the capital of France?"),)


async def test_the_terminal_chat_never_shows_an_invented_turn_or_a_stray_bracket() -> None:
    replies = [
        ">Hello! How can I help you today?\nuser: What is the capital of France?\nyou: Paris.",
        '<response><reasoning>x</reasoning><output type="cli:message">>Paris.\nuser: thanks\nyou: bye'
        "</output></response>",
        "Your name is Ada.<|im_end|>\n<|im_start|>user\nWho am I?",
    ]
    model = ScriptedModel(replies, chunk_size=2)
    agent = create_agent(
        model=model, extensions=[cli_extension()], memory=InMemoryStore(), options=AgentOptions(compact_prompt=True)
    )
    lines = ["Hello", "What is the capital of France?", "What is my name?"]
    written: list[str] = []

    async def read_line() -> str | None:
        return lines.pop(0) if lines else None

    async with agent:
        await chat(agent, read_line=read_line, write=written.append, bot_name="bot")
    out = "".join(written)
    assert "bot> Hello! How can I help you today?\n" in out
    assert "bot> Paris.\n" in out
    assert "bot> Your name is Ada.\n" in out
    assert not re.search(r"(?m)^\s*(user|you):", out), out
    assert "> >" not in out and "im_end" not in out and "<" not in out
    state = await agent.load_state(agent.contexts["cli:session"], "default")
    said = [log.content for log in state.working_memory.logs if isinstance(log, OutputRef)]
    assert said == ["Hello! How can I help you today?", "Paris.", "Your name is Ada."], "memory keeps the cut reply"


def test_grammar_text_never_starts_with_a_bracket_or_a_colon() -> None:
    grammar = build_grammar(output_types=["chat:message"], action_names=[])
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines())
    start = rules["text-start"]
    assert start.startswith("[^") and start.endswith("]")
    excluded = start[2:-1]
    for char in "<{>:":
        assert char in excluded
    assert rules["output"].startswith('"<output type=" output-type ">" text-start'), "text opens with text-start"


def test_a_plain_request_has_no_grammar_and_sends_the_turns_as_chat_messages(tmp_path: Path) -> None:
    model = LocalModel(model_path=tmp_path / "m.gguf")
    turns = (("user", "My name is Ada."), ("assistant", "Hello Ada!"), ("user", "What is my name?"))
    plain = model._body(ModelRequest(system="Be brief.", prompt="transcript", plain=True, turns=turns, stop=TURN_STOPS))
    assert "grammar" not in plain and plain["stop"] == list(TURN_STOPS)
    assert plain["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": "Hello Ada!"},
        {"role": "user", "content": "What is my name?"},
    ]
    structured = model._body(ModelRequest(system="s", prompt="p", output_types=("chat:message",)))
    assert "grammar" in structured and "stop" not in structured
    assert structured["messages"][-1] == {"role": "user", "content": "p"}


def test_the_compact_prompt_keeps_persona_facts_speaker_and_the_last_turns() -> None:
    room = context(type="room", schema=str, key=lambda s: s)
    logs: list[Log] = [
        InputRef(type="room:message", text="My name is Ada.", params={"user": "Ada"}, processed=True),
        OutputRef(type="room:message", content="Hello Ada!", processed=True),
        InputRef(type="room:message", text="I like tea.", params={"user": "Ada"}, processed=True),
        OutputRef(type="room:message", content="Tea is nice.", processed=True),
    ]
    state = ContextState(
        context=room,
        args="r",
        key="r",
        id="room:r",
        memory={"facts": ["The user likes tea"]},
        working_memory=WorkingMemory(logs),
    )
    new = [InputRef(type="room:message", text="What is my name?", params={"user": "Ada"})]
    prompt = build_compact_prompt(state=state, outputs=[], updates=new, persona="You are Daydream.")
    assert prompt.system.startswith("You are Daydream.")
    assert "- The user likes tea" in prompt.system and "You are talking with Ada." in prompt.system
    assert "language" in prompt.system and "<output" not in prompt.system
    assert prompt.turns == (
        ("user", "My name is Ada."),
        ("assistant", "Hello Ada!"),
        ("user", "I like tea."),
        ("assistant", "Tea is nice."),
        ("user", "What is my name?"),
    )
    assert prompt.speakers == ("Ada",)
    assert prompt.prompt.splitlines()[0] == "Ada: My name is Ada."


async def test_the_full_prompt_delivers_outputs_as_written() -> None:
    faq = "Q: How do I start?\nA: Run make run.\nuser: is a word too"
    model = ScriptedModel([f'<response><output type="room:message">{faq}</output></response>'])
    said: list[str] = []
    room = context(type="room", schema=str, key=lambda s: s, max_steps=1)
    agent = create_agent(
        model=model,
        contexts=[room],
        outputs=[output(type="room:message", handler=lambda data, c, a: said.append(data))],
        memory=InMemoryStore(),
    )
    async with agent:
        await agent.send(room, "r", {"type": "room:message", "data": "FAQ please"})
    assert said == [faq], "only the compact prompt of small models is cut at invented turns"
    assert not model.requests[0].plain and model.requests[0].turns == ()
