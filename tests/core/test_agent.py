"""The step loop with a scripted model: every failure is an answer the model sees, never a crash."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from core import (
    ActionError,
    ActionResult,
    AgentOptions,
    DefinitionError,
    ErrorLog,
    InMemoryStore,
    ModelCall,
    ModelError,
    ModelRequest,
    OutputRef,
    Plugin,
    RunEventType,
    RunHooks,
    RunView,
    ScriptedModel,
    SQLiteStore,
    action,
    context,
    create_agent,
    output,
)
from core.busy import BusyPolicy
from core.testing import updates_of

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=4)


class Add(BaseModel):
    a: int
    b: int


class Reply(BaseModel):
    to: str


def make(
    replies: Any,
    *,
    sent: list[Any] | None = None,
    memory: Any = None,
    extra_actions: tuple[Any, ...] = (),
    extra_outputs: tuple[Any, ...] = (),
    **model_kw: Any,
) -> tuple[Any, ScriptedModel]:
    sent = sent if sent is not None else []
    add = action(name="add", schema=Add, handler=lambda args, ctx, ag: {"sum": args.a + args.b})
    say = output(type="chat:message", handler=lambda data, ctx, ag: sent.append(data))
    model = ScriptedModel(replies, **model_kw)
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[add, *extra_actions],
        outputs=[say, *extra_outputs],
        memory=memory or InMemoryStore(),
    )
    return agent, model


def msg(text: str) -> dict[str, Any]:
    return {"type": "chat:message", "data": text}


def R(body: str) -> str:
    return f"<response><reasoning>thinking</reasoning>{body}</response>"


async def test_action_result_then_output_over_two_steps() -> None:
    sent: list[str] = []
    agent, model = make(
        [
            R('<action_call name="add">{"a": 2, "b": 3}</action_call>'),
            R('<output type="chat:message">5</output>'),
        ],
        sent=sent,
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("2+3?"))
    assert sent == ["5"]
    assert len(model.requests) == 2
    assert '"sum": 5' in updates_of(model.requests[1].prompt)
    assert [type(c).__name__ for c in chain] == [
        "InputRef", "Thought", "ActionCall", "ActionResult", "Thought", "OutputRef",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('<action_call name="nope">{}</action_call>', "unknown action 'nope'; available actions: add"),
        ('<action_call name="add">{"a": "x"}</action_call>', "b: Field required"),
        ('<action_call name="add">{"a": 1,</action_call>', "not valid JSON"),
        ('<action_call name="boom">{}</action_call>', "'boom' raised RuntimeError: kaboom"),
        ('<action_call name="slow">{}</action_call>', "'slow' timed out after 0.05s"),
        ('<output type="nope">hi</output>', "unknown output type 'nope'"),
        ('<output type="reply">hi</output>', "to: Field required"),
        ('<output type="chat:message">{{calls[0].sum}}</output>', "no action was called"),
        ('<output type="chat:message">{{calls.x}}</output>', "has no field 'x'"),
        ('<output type="failing">hi</output>', "handler exploded"),
        ("plain text with no tags", "outside of any tag"),
    ],
)
async def test_every_failure_is_shown_to_the_model_and_the_context_keeps_working(body: str, expected: str) -> None:
    async def slow(args: Any, ctx: Any, agent: Any) -> None:
        await asyncio.sleep(10)

    def boom(args: Any, ctx: Any, agent: Any) -> None:
        raise RuntimeError("kaboom")

    def failing(data: Any, ctx: Any, agent: Any) -> None:
        raise ValueError("handler exploded")

    sent: list[str] = []
    agent, model = make(
        [
            body if "<" not in body[:1] else R(body),
            R('<output type="chat:message">fixed</output>'),
            R('<output type="chat:message">still here</output>'),
        ],
        sent=sent,
        extra_actions=(
            action(name="boom", handler=boom),
            action(name="slow", handler=slow, timeout=0.05),
        ),
        extra_outputs=(
            output(type="reply", attributes=Reply, handler=lambda d, c, a: sent.append(("reply", d))),
            output(type="failing", handler=failing, errors_to_model=True),
        ),
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        assert len(model.requests) == 2
        updates = updates_of(model.requests[1].prompt)
        assert expected in updates
        assert sent == ["fixed"]
        await agent.send(chat, "u", msg("again"))
        assert sent == ["fixed", "still here"]


async def test_an_action_handler_bug_is_a_warning_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    tries = 0

    def flaky(args: Any, ctx: Any, agent: Any) -> None:
        nonlocal tries
        tries += 1
        raise RuntimeError(f"kaboom {tries}")

    def refuse(args: Any, ctx: Any, agent: Any) -> None:
        raise ActionError("no such city")  # an answer for the model, not a bug

    agent, model = make(
        [
            R('<action_call name="flaky">{}</action_call><action_call name="refuse">{}</action_call>'),
            R('<output type="chat:message">sorry</output>'),
        ],
        extra_actions=(action(name="flaky", handler=flaky, retry=1), action(name="refuse", handler=refuse)),
    )
    with caplog.at_level(logging.DEBUG, logger="core.handlers"):
        async with agent:
            await agent.send(chat, "u", msg("hi"))
    assert "'flaky' raised RuntimeError: kaboom 2" in model.requests[1].prompt  # the model still sees it
    assert "no such city" in model.requests[1].prompt
    by_level = {(r.levelno, r.getMessage()): r for r in caplog.records if r.name == "core.handlers"}
    assert set(by_level) == {
        (logging.DEBUG, "action flaky raised (attempt 1/2)"),  # retried: not a failure yet
        (logging.WARNING, "action flaky raised (attempt 2/2)"),
        (logging.DEBUG, "action refuse raised (attempt 1/1)"),
    }
    warned = by_level[(logging.WARNING, "action flaky raised (attempt 2/2)")]
    assert warned.exc_info is not None and str(warned.exc_info[1]) == "kaboom 2"


async def test_unresolved_template_text_never_reaches_the_user() -> None:
    sent: list[str] = []
    agent, _ = make([R('<output type="chat:message">Your id is {{calls[0].id}}</output>'), R("")], sent=sent)
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    assert sent == []
    assert any(isinstance(c, OutputRef) and c.error for c in chain)


async def test_templates_resolve_from_earlier_calls_in_the_same_response() -> None:
    sent: list[str] = []
    agent, _ = make(
        [
            R(
                '<action_call name="add">{"a": 1, "b": 2}</action_call>'
                '<action_call name="add">{"a": "{{calls[0].sum}}", "b": 10}</action_call>'
                '<output type="chat:message">sum={{calls[1].sum}}</output>'
            ),
            R(""),
        ],
        sent=sent,
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    assert sent == ["sum=13"]
    assert [c.data for c in chain if isinstance(c, ActionResult)] == [{"sum": 3}, {"sum": 13}]


async def test_outputs_run_in_order_as_their_tags_close() -> None:
    seen: list[tuple[str, int]] = []
    model_ref: list[ScriptedModel] = []
    agent, model = make(
        [R('<output type="chat:message">one</output><output type="chat:message">two</output>' + " " * 200)],
        chunk_size=8,
        delay=0.001,
    )
    model_ref.append(model)

    def record(data: str, ctx: Any, ag: Any) -> None:
        seen.append((data, len(model_ref[0].requests)))

    agent.outputs[0].handler = record
    got_first_before_end: list[bool] = []

    async with agent:
        listener_task = asyncio.create_task(agent.send(chat, "u", msg("hi")))
        while not seen:
            await asyncio.sleep(0)
        got_first_before_end.append(not listener_task.done())
        await listener_task
    assert [s[0] for s in seen] == ["one", "two"]
    assert got_first_before_end == [True]


class Gate:
    """A model that waits for a signal before answering, and counts parallel calls."""

    name = "gate"
    model = ""
    vision = False
    last_usage = None

    def __init__(self, *, shown_first: bool = False) -> None:
        self.requests: list[ModelRequest] = []
        self.running = 0
        self.max_running = 0
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.shown_first = shown_first
        """The answer's first words are written (and shown) before it waits for ``release``."""
        self.shown = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        self.started.set()
        n = len(self.requests)
        try:
            if self.shown_first:
                yield f'<response><output type="chat:message">answer {n}'
                self.shown.set()
                await self.release.wait()
                yield "</output></response>"
                return
            await self.release.wait()
            yield R(f'<output type="chat:message">answer {n}</output>')
        finally:
            self.running -= 1


async def test_an_input_joins_the_running_run_and_is_seen_in_the_next_step() -> None:
    """Once words of the answer are shown, an input that joins is read at the run's next step (``BOT_BUSY=steer``)."""
    sent: list[str] = []
    gate = Gate(shown_first=True)
    agent = create_agent(
        model=gate,
        contexts=[chat],
        outputs=[output(type="chat:message", handler=lambda d, c, a: sent.append(d))],
    )
    async with agent:
        first = asyncio.create_task(agent.send(chat, "u", msg("first")))
        await gate.shown.wait()
        second = asyncio.create_task(agent.send(chat, "u", msg("second")))
        for _ in range(5):
            await asyncio.sleep(0)
        gate.release.set()
        chain1, chain2 = await asyncio.gather(first, second)
    assert chain1 is chain2, "the second input joined the first run"
    assert gate.max_running == 1, "never two model calls at once on one context"
    assert len(gate.requests) == 2
    updates = updates_of(gate.requests[1].prompt)
    assert "second" in updates
    assert "first" not in updates
    assert sent == ["answer 1", "answer 2"]


@pytest.mark.parametrize("busy", ["steer", "collect", "queue", "interrupt"])
async def test_an_input_before_the_first_word_starts_the_model_call_again_with_both(busy: str) -> None:
    """No word of the answer shown yet: the model call is cancelled and started again with both inputs, one answer
    for the two whatever the busy policy (``core.busy``); the cancelled call is counted and charged as such."""
    sent: list[str] = []
    seen: list[tuple[str, float]] = []
    charged: list[ModelCall] = []

    class Noted(RunHooks):
        async def charged(self, call: ModelCall) -> None:
            charged.append(call)

    class Charges(Plugin):
        name = "charges"

        def begin(self, run: RunView) -> RunHooks:
            return Noted()

    gate = Gate()
    agent = create_agent(
        model=gate,
        contexts=[chat],
        outputs=[output(type="chat:message", handler=lambda d, c, a: sent.append(d))],
        options=AgentOptions(busy=BusyPolicy(busy)),
        plugins=[Charges()],
    )
    agent.observers.append(lambda kind, cid, value: seen.append((kind, value)))
    async with agent:
        first = asyncio.create_task(agent.send(chat, "u", msg("first")))
        await gate.started.wait()
        second = asyncio.create_task(agent.send(chat, "u", msg("second")))
        while len(gate.requests) < 2:
            await asyncio.sleep(0)
        gate.release.set()
        chain1, chain2 = await asyncio.gather(first, second)
    assert chain1 is chain2, "one run answered both"
    assert gate.max_running == 1, "never two model calls at once on one context"
    updates = updates_of(gate.requests[1].prompt)
    assert "first" in updates and "second" in updates
    assert sent == ["answer 2"], "one visible answer for the two"
    assert [kind for kind, _ in seen].count("model_call_restarted") == 1
    assert [c.cancelled for c in charged] == [1, 0]
    assert charged[0].estimated and charged[0].input_tokens > 0


async def test_different_contexts_run_in_parallel() -> None:
    gate = Gate()
    agent = create_agent(model=gate, contexts=[chat], outputs=[output(type="chat:message")])
    async with agent:
        tasks = [asyncio.create_task(agent.send(chat, f"user{i}", msg("hi"))) for i in range(5)]
        while gate.running < 5:
            await asyncio.sleep(0.001)
        gate.release.set()
        await asyncio.gather(*tasks)
    assert gate.max_running == 5


async def test_model_failure_ends_the_run_cleanly_and_the_context_keeps_working() -> None:
    failures: list[Exception] = []
    sent: list[str] = []
    ctx = context(type="c2", schema=str, on_error=lambda exc, state, agent: failures.append(exc))
    agent = create_agent(
        model=ScriptedModel([ModelError("provider down"), R('<output type="m">back</output>')]),
        contexts=[ctx],
        outputs=[output(type="m", handler=lambda d, c, a: sent.append(d))],
    )
    async with agent:
        chain = await agent.send(ctx, "x", {"type": "m", "data": "hi"})
        assert isinstance(chain[-1], ErrorLog) and "provider down" in chain[-1].message
        assert len(failures) == 1 and isinstance(failures[0], ModelError)
        await agent.send(ctx, "x", {"type": "m", "data": "again"})
    assert sent == ["back"]


async def test_a_model_that_never_stops_erring_is_bounded_by_max_steps() -> None:
    agent, model = make([R('<action_call name="nope">{}</action_call>')], repeat_last=True)
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert len(model.requests) == chat.max_steps


async def test_a_silent_model_times_out() -> None:
    class Silent:
        name = "silent"
        model = ""
        vision = False
        last_usage = None

        async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
            await asyncio.sleep(30)
            yield ""

    agent = create_agent(
        model=Silent(),
        contexts=[chat],
        outputs=[output(type="chat:message")],
        options=AgentOptions(model_idle_timeout=0.05),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    assert isinstance(chain[-1], ErrorLog) and "sent nothing" in chain[-1].message


async def test_sqlite_memory_survives_an_agent_restart(tmp_path: Any) -> None:
    def remember(args: dict[str, Any], ctx: Any, agent: Any) -> str:
        ctx.memory["fact"] = args["fact"]
        return "ok"

    def build(replies: list[str]) -> tuple[Any, ScriptedModel]:
        model = ScriptedModel(replies)
        agent = create_agent(
            model=model,
            contexts=[chat],
            actions=[action(name="remember", handler=remember)],
            outputs=[output(type="chat:message")],
            memory=SQLiteStore(tmp_path / "mem.sqlite3"),
        )
        return agent, model

    agent, _ = build([R('<action_call name="remember">{"fact": "likes tea"}</action_call>'), R("")])
    async with agent:
        await agent.send(chat, "u", msg("I like tea"))
    agent, model = build([R('<output type="chat:message">tea</output>')])
    async with agent:
        await agent.send(chat, "u", msg("what do I like?"))
    prompt = model.requests[0].prompt
    assert '"fact": "likes tea"' in prompt
    assert "I like tea" in prompt.split("<working-memory>")[1]


async def test_working_memory_is_bounded() -> None:
    small = context(type="small", schema=str, max_working_memory=5, keep_logs=10)
    agent = create_agent(
        model=ScriptedModel([R('<output type="m">ok</output>')], repeat_last=True),
        contexts=[small],
        outputs=[output(type="m")],
    )
    async with agent:
        for i in range(30):
            await agent.send(small, "k", {"type": "m", "data": f"message {i}"})
        state = await agent.load_state(small, "k")
    assert len(state.working_memory.logs) <= 10
    assert "message 29" in str(state.working_memory.logs[-3].model_dump())


async def test_stream_events() -> None:
    agent, _ = make(
        [
            R('<action_call name="add">{"a": 1, "b": 1}</action_call>'),
            R('<output type="chat:message">two</output>'),
        ]
    )
    async with agent:
        events = [e async for e in agent.stream(chat, "u", msg("1+1"))]
    types = [e.type for e in events]
    assert types[0] == RunEventType.REASONING and events[0].is_type_switched
    assert RunEventType.TOOL_CALL in types and RunEventType.TOOL_CALL_RESULT in types
    result = next(e for e in events if e.type == RunEventType.TOOL_CALL_RESULT)
    assert result.role == "tool" and result.content["result"] == {"sum": 2}
    final = [e for e in events if e.type == RunEventType.OUTPUT_TEXT_DONE]
    assert final[0].content == "two" and final[0].final
    assert "".join(e.content for e in events if e.type == RunEventType.OUTPUT_TEXT) == "two"  # once
    # is_type_switched to the letter: the first event of a new type, and only that
    assert [e.is_type_switched for e in events] == [a != b for a, b in zip([None, *types], types, strict=False)]
    async with agent:
        no_reasoning = [e async for e in agent.stream(chat, "v", msg("x"), reasoning=False)]
    assert all(e.type != RunEventType.REASONING for e in no_reasoning)


async def test_listeners_find_the_state_of_the_running_context() -> None:
    agent, _ = make([R('<output type="chat:message">hi</output>')])
    seen: list[Any] = []
    agent.event_listeners.append(lambda event: seen.append(agent.state_of(event.context_id)))
    async with agent:
        await agent.send(chat, "u", msg("hello"))
        assert agent.state_of("chat:u") is None  # between runs
    assert seen and all(state is not None and state.id == "chat:u" for state in seen)


def test_bad_definitions_fail_at_definition_time() -> None:
    with pytest.raises(DefinitionError, match="not a valid name"):
        action(name="bad name", handler=lambda a, c, g: None)
    with pytest.raises(DefinitionError, match="cannot build a schema"):
        output(type="x", schema=object())
    same = output(type="dup")
    with pytest.raises(DefinitionError, match="defined twice"):
        create_agent(model=ScriptedModel([]), outputs=[same, output(type="dup")])


async def test_compact_prompt_for_small_models_has_the_conversation_and_no_tools() -> None:
    model = ScriptedModel(
        [R('<output type="chat:message">one</output>'), R('<output type="chat:message">two</output>')]
    )
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[action(name="add", schema=Add, handler=lambda a, c, g: 0)],
        outputs=[output(type="chat:message")],
        options=AgentOptions(persona="You are Tester.", compact_prompt=True),
    )
    async with agent:
        await agent.send(chat, "u", {"type": "chat:message", "data": "hello", "params": {"user": "ada"}})
        await agent.send(chat, "u", msg("again"))
    request = model.requests[1]
    assert request.action_names == ()
    assert request.prompt == "ada: hello\nyou: one\nuser: again"
    assert request.turns == (("user", "ada: hello"), ("assistant", "one"), ("user", "again"))
    assert request.plain and "\nuser:" in request.stop
    assert request.system.startswith("You are Tester.") and "<output" not in request.system


async def test_reset_during_a_run_is_not_undone_by_the_run_saving() -> None:
    gate = Gate()
    gate.release.set()
    agent = create_agent(model=gate, contexts=[chat], outputs=[output(type="chat:message")])
    async with agent:
        await agent.send(chat, "u", msg("remember me"))
        gate.release.clear()
        running = asyncio.create_task(agent.send(chat, "u", msg("second")))
        while gate.running == 0:
            await asyncio.sleep(0)
        await agent.reset(chat, "u")
        gate.release.set()
        await running
        state = await agent.load_state(chat, "u")
    assert state.working_memory.logs == []


def test_the_compact_prompt_follows_a_model_that_prefers_it() -> None:
    """``create_agent`` gives the embedded model the compact prompt as ``bots run`` does (issue 34); an option
    still decides."""
    from core.models.local import LocalModel

    class Small(ScriptedModel):
        prefers_compact = True

    assert LocalModel.prefers_compact is True
    chat = context(type="chat", schema=str, key=lambda s: s)
    assert create_agent(model=Small([]), contexts=[chat]).compact_prompt is True
    assert create_agent(model=ScriptedModel([]), contexts=[chat]).compact_prompt is False
    forced = create_agent(model=Small([]), contexts=[chat], options=AgentOptions(compact_prompt=False))
    assert forced.compact_prompt is False
