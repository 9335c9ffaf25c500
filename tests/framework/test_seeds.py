"""The behaviours of the five seed documents, one test each where no other test shows it (docs/fidelity.md).

A test marked ``xfail(strict=True)`` shows a behaviour that is missing or partial today: it states the API it
expects, so whoever builds the behaviour only removes the marker (a test that starts passing while still marked
fails the suite, so the table cannot fall behind).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from core import (
    ActionCall,
    ActionResult,
    DefinitionError,
    ErrorLog,
    InMemoryStore,
    InputRef,
    ModelError,
    OutputRef,
    RunEvent,
    RunEventType,
    Thought,
    action,
    context,
    create_agent,
    data_input,
    input,
    output,
    read_state,
    write_state,
)
from core.loop_guard import LoopGuard
from core.models import ModelRequest, ScriptedModel
from core.prompt import FOOTER, INSTRUCTIONS, RESPONSE_FORMAT

from .kit import R, bot, chat, msg, section


def gap(what: str) -> pytest.MarkDecorator:
    """The marker of a behaviour that is missing today."""
    return pytest.mark.xfail(strict=True, reason=f"issue 22: {what}")


class Weather(BaseModel):
    city: str


class Channel(BaseModel):
    channelId: str
    replyToUserId: str | None = None


class Card(BaseModel):
    title: str
    stars: int


class Saved(BaseModel):
    """Arguments of an action whose result may be saved anywhere (a flexible ``_outputPath``)."""

    model_config = ConfigDict(populate_by_name=True)
    value: Any = None
    output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")


def results(chain: list[Any]) -> list[tuple[str, Any, str | None]]:
    return [(c.name, c.data, c.error) for c in chain if isinstance(c, ActionResult)]


def echo_action(name: str = "echo", **kw: Any) -> Any:
    return action(name=name, schema=Saved, handler=lambda args, ctx, agent: args.value, **kw)


# -- Outputs -----------------------------------------------------------------------------------------------


async def test_outputs_are_offered_with_every_field() -> None:
    say = output(
        type="discord:message",
        description="Sends a message to a channel.",
        instructions="Use this to reply.",
        attributes=Channel,
        examples=['<output type="discord:message" channelId="1">Hi</output>'],
    )
    agent, model = bot([R("")], outputs=(say,))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    offered = section(model.requests[0].prompt, "available-outputs")
    assert '<output type="discord:message">' in offered
    assert "<description>Sends a message to a channel.</description>" in offered
    assert "<instructions>Use this to reply.</instructions>" in offered
    assert '<content_schema>{"type": "string"}</content_schema>' in offered
    assert "<attributes_schema>" in offered and "channelId" in section(offered, "attributes_schema")
    assert '<examples><output type="discord:message" channelId="1">Hi</output></examples>' in offered


async def test_output_content_defaults_to_text_and_a_schema_validates_json_content() -> None:
    got: list[Any] = []
    text = output(type="text", handler=lambda data, ctx, agent: got.append(data))
    card = output(type="card", schema=Card, handler=lambda data, ctx, agent: got.append(data))
    agent, model = bot(
        [
            R(
                '<output type="text">  plain words  </output>'
                '<output type="card">{"title": "Tea", "stars": 5}</output>'
                '<output type="card">{"title": "Tea", "stars": "many"}</output>'
            ),
            R(""),
        ],
        outputs=(text, card),
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert got == ["plain words", Card(title="Tea", stars=5)]
    assert "stars: Input should be a valid integer" in section(model.requests[1].prompt, "updates")


async def test_an_output_handler_receives_the_content_the_attributes_and_the_agent() -> None:
    seen: list[Any] = []

    def send(data: str, ctx: Any, agent: Any) -> None:
        seen.append((data, ctx.output_ref.params, ctx.attributes, agent, ctx.state.id))

    say = output(type="discord:message", attributes=Channel, handler=send)
    agent, _ = bot(
        [R('<output type="discord:message" channelId="42" replyToUserId="ada">Got it!</output>')], outputs=(say,)
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert seen == [
        (
            "Got it!",
            {"channelId": "42", "replyToUserId": "ada"},
            Channel(channelId="42", replyToUserId="ada"),
            agent,
            "chat:u",
        ),
    ]


async def test_an_output_handler_may_return_a_dict_that_updates_the_log_entry() -> None:
    def send(data: str, ctx: Any, agent: Any) -> dict[str, Any]:
        return {"data": {"content": f"<@ada> {data}", "channelId": "42"}, "params": {"channelId": "42", "sent": 1}}

    agent, _ = bot([R('<output type="m" channelId="42">Hi</output>')], outputs=(output(type="m", handler=send),))
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    ref = next(c for c in chain if isinstance(c, OutputRef))
    assert ref.data == {"content": "<@ada> Hi", "channelId": "42"}
    assert ref.params == {"channelId": "42", "sent": "1"}


async def test_an_output_handler_may_return_an_output_ref_response() -> None:
    from core import OutputRefResponse

    def send(data: str, ctx: Any, agent: Any) -> Any:
        return OutputRefResponse(data={"content": data, "channelId": "42"}, params={"channelId": "42"}, processed=True)

    agent, _ = bot([R('<output type="m" channelId="42">Hi</output>')], outputs=(output(type="m", handler=send),))
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    ref = next(c for c in chain if isinstance(c, OutputRef))
    assert ref.data == {"content": "Hi", "channelId": "42"} and ref.processed


async def test_an_output_handler_may_return_a_list_of_responses() -> None:
    from core import OutputRefResponse

    def send(data: str, ctx: Any, agent: Any) -> Any:
        return [OutputRefResponse(data=part, processed=True) for part in data.split("|")]

    agent, _ = bot([R('<output type="m">one|two</output>')], outputs=(output(type="m", handler=send),))
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    assert [c.data for c in chain if isinstance(c, OutputRef)] == ["one", "two"]


async def test_an_output_handler_may_return_a_list_of_dicts() -> None:
    """As the README says: a dict with ``data``/``params``/``processed`` works too, and so does a list of them."""

    def send(data: str, ctx: Any, agent: Any) -> Any:
        return [{"data": part, "params": {"part": str(i)}} for i, part in enumerate(data.split("|"))]

    agent, _ = bot([R('<output type="m">one|two</output>')], outputs=(output(type="m", handler=send),))
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    refs = [c for c in chain if isinstance(c, OutputRef)]
    assert [(c.data, c.params, c.error) for c in refs] == [("one", {"part": "0"}, None), ("two", {"part": "1"}, None)]


async def test_a_list_mixing_responses_with_anything_else_is_refused_with_an_error() -> None:
    def send(data: str, ctx: Any, agent: Any) -> Any:
        return [{"data": data}, "sent"]

    agent, _ = bot([R('<output type="m">one</output>')], outputs=(output(type="m", handler=send),))
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    [ref] = [c for c in chain if isinstance(c, OutputRef)]
    assert ref.error is not None and "item 1 is str, not a response" in ref.error


async def test_processed_false_keeps_the_output_in_the_updates() -> None:
    from core import OutputRefResponse

    calls: list[str] = []

    def send(data: str, ctx: Any, agent: Any) -> Any:
        calls.append(data)
        return OutputRefResponse(data=data, processed=len(calls) > 1)

    agent, model = bot(
        [R('<output type="m">draft</output>'), R('<output type="m">final</output>')],
        outputs=(output(type="m", handler=send),),
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert len(model.requests) == 2
    assert '<output type="m"' in section(model.requests[1].prompt, "updates")
    assert "draft" in section(model.requests[1].prompt, "updates")


async def test_format_is_how_an_output_is_shown_in_working_memory() -> None:
    say = output(
        type="m",
        handler=lambda data, ctx, agent: None,
        format=lambda ref: f"Sent to {ref.params.get('to')}: {ref.data}",
    )
    agent, model = bot([R('<output type="m" to="ada">Hello</output>'), R("")], outputs=(say,))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        await agent.send(chat, "u", msg("again"))
    assert "Sent to ada: Hello" in section(model.requests[1].prompt, "working-memory")


async def test_format_applies_to_an_output_without_a_handler() -> None:
    say = output(type="m", format=lambda ref: f"Sent to {ref.params.get('to')}: {ref.data}")
    agent, model = bot([R('<output type="m" to="ada">Hello</output>'), R("")], outputs=(say,))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        await agent.send(chat, "u", msg("again"))
    assert "Sent to ada: Hello" in section(model.requests[1].prompt, "working-memory")


async def test_install_runs_once_when_the_agent_starts() -> None:
    installed: list[str] = []
    say = output(type="m", install=lambda agent: installed.append("output"))
    act = action(name="a", handler=lambda args, ctx, agent: 1, install=lambda agent: installed.append("action"))
    agent, _ = bot([], outputs=(say,), actions=(act,))
    async with agent:
        assert sorted(installed) == ["action", "output"]
    assert sorted(installed) == ["action", "output"]


async def test_install_runs_for_context_actions_and_outputs() -> None:
    installed: list[str] = []
    own = context(
        type="own",
        schema=str,
        actions=[action(name="a", handler=lambda args, ctx, agent: 1, install=lambda agent: installed.append("a"))],
        outputs=[output(type="o", install=lambda agent: installed.append("o"))],
    )
    agent, _ = bot([], contexts=(own,))
    async with agent:
        assert sorted(installed) == ["a", "o"]


async def test_enabled_and_context_decide_where_an_output_is_offered() -> None:
    other = context(type="other", schema=str)
    here = output(type="here", context=chat)
    elsewhere = output(type="elsewhere", context=other)
    gated = output(type="gated", enabled=lambda state: state.key == "vip")
    agent, model = bot([R(""), R("")], outputs=(here, elsewhere, gated), contexts=(chat, other))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        await agent.send(chat, "vip", msg("hi"))
    offered = [section(r.prompt, "available-outputs") for r in model.requests]
    assert '"here"' in offered[0] and '"elsewhere"' not in offered[0] and '"gated"' not in offered[0]
    assert '"gated"' in offered[1]


async def test_the_output_log_entry_exists_while_its_tag_streams() -> None:
    seen: list[bool] = []
    agent, _ = bot([R('<output type="chat:message">a long answer, streamed</output>')], chunk_size=4)

    def listen(event: RunEvent) -> None:
        if event.type == RunEventType.OUTPUT_TEXT and not event.final and not seen:
            state = agent.state_of(event.context_id)
            seen.append(state is not None and any(isinstance(e, OutputRef) for e in state.working_memory.logs))

    agent.add_event_listener(listen)
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert seen == [True]


class Streaming(ScriptedModel):
    """A scripted model that says whether it is still streaming its reply."""

    streaming = False

    async def stream(self, request: ModelRequest) -> Any:
        self.streaming = True
        try:
            async for chunk in super().stream(request):
                yield chunk
        finally:
            self.streaming = False


async def test_an_output_handler_runs_as_its_tag_closes_while_the_rest_still_streams() -> None:
    model = Streaming([R('<output type="m">one</output><output type="m">two</output>' + " " * 200)], chunk_size=8)
    seen: list[tuple[str, bool]] = []
    say = output(type="m", handler=lambda data, ctx, agent: seen.append((data, model.streaming)))
    agent = create_agent(model=model, contexts=[chat], outputs=[say], memory=InMemoryStore())
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert seen == [("one", True), ("two", True)]


async def test_every_failure_of_an_output_is_an_error_the_model_sees_and_the_agent_goes_on() -> None:
    def broken(data: str, ctx: Any, agent: Any) -> None:
        raise ConnectionError("discord is down")

    sent: list[str] = []
    agent, model = bot(
        [
            R(
                '<output type="nope">x</output><output type="card">{"title": 1}</output><output type="broken">x</output>'
            ),
            R('<output type="chat:message">sorry</output>'),
        ],
        outputs=(
            output(type="card", schema=Card),
            output(type="broken", handler=broken, errors_to_model=True),
            output(type="chat:message", handler=lambda data, ctx, agent: sent.append(data)),
        ),
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    updates = section(model.requests[1].prompt, "updates")
    assert "unknown output type 'nope'" in updates
    assert "title: Input should be a valid string" in updates
    assert "discord is down" in updates  # this output asked for its handler's failures (errors_to_model=True)
    assert sent == ["sorry"]


async def test_a_failing_output_handler_is_logged_not_sent_back_to_the_model(caplog: pytest.LogCaptureFixture) -> None:
    """The Outputs seed: output errors are handled internally (logged, retried), not returned to the model as an
    action's are; no model call is spent on them."""

    def broken(data: str, ctx: Any, agent: Any) -> None:
        raise ConnectionError("discord is down")

    agent, model = bot([R('<output type="broken">x</output>'), R("")], outputs=(output(type="broken", handler=broken),))
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    assert len(model.requests) == 1
    [ref] = [c for c in chain if isinstance(c, OutputRef)]
    assert ref.error == "discord is down"  # on its log entry: working memory shows it was not delivered
    assert "output broken was not delivered: 'discord is down'" in caplog.text


async def test_an_output_retries_its_handler() -> None:
    attempts: list[str] = []

    def flaky(data: str, ctx: Any, agent: Any) -> None:
        attempts.append(data)
        if len(attempts) < 3:
            raise ConnectionError("try again")

    agent, model = bot([R('<output type="m">Hi</output>'), R("")], outputs=(output(type="m", handler=flaky, retry=2),))
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    assert attempts == ["Hi", "Hi", "Hi"] and len(model.requests) == 1
    [ref] = [c for c in chain if isinstance(c, OutputRef)]
    assert ref.error is None
    with pytest.raises(DefinitionError, match="retry"):
        output(type="m", retry=-1)


async def test_an_output_is_kept_in_working_memory() -> None:
    agent, model = bot([R('<output type="chat:message">Hello Ada</output>'), R("")])
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
        await agent.send(chat, "u", msg("again"))
        state = await agent.load_state(chat, "u")
    assert next(c for c in chain if isinstance(c, OutputRef)).data == "Hello Ada"
    assert any(isinstance(e, OutputRef) and e.data == "Hello Ada" for e in state.working_memory.logs)
    assert '<output type="chat:message"' in section(model.requests[1].prompt, "working-memory")


async def test_an_output_alone_does_not_call_the_model_again() -> None:
    agent, model = bot([R('<output type="chat:message">Hi!</output>')])
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert len(model.requests) == 1


# -- Prompting ---------------------------------------------------------------------------------------------


def in_order(text: str, parts: list[str]) -> bool:
    """Each of ``parts`` is in ``text`` after the one before it."""
    at = 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True


LOOKUP = action(name="lookup", description="Looks a word up", schema=str, handler=lambda a, c, h: "found")
"""An action, so that the prompt offers actions (a bot with none gets no action syntax at all: issue 51)."""


async def test_the_prompt_has_the_template_sections_in_order() -> None:
    agent, model = bot([R("")], intro="You are Tester.", actions=(LOOKUP,))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    request = model.requests[0]
    # the same at every step: the seed's static sections, the response format and the footer among them (a prefix a
    # provider's prompt cache reads, issue 51: docs/fidelity.md, P1); the updates' count, which changes, last
    assert request.system == f"You are Tester.\n\n{INSTRUCTIONS}\n\n{RESPONSE_FORMAT}\n\n{FOOTER}"
    whole = f"{request.system}\n\n{request.prompt}"
    content = [f"<{name}>" for name in ("available-actions", "available-outputs", "contexts", "working-memory")]
    order = ["You are Tester.", INSTRUCTIONS, RESPONSE_FORMAT, FOOTER, *content, '<updates count="1"/>']
    assert in_order(whole, order) and whole.startswith(order[0]) and whole.endswith(order[-1])


async def test_a_template_places_each_part_of_the_content_apart() -> None:
    template = (
        "{{intro}}\n\n{{instructions}}\n\n{{contexts}}\n\n{{workingMemory}}\n\n{{response}}\n\n"
        "NEW:\n{{updates}}\n\nTOOLS:\n{{actions}}\n{{outputs}}\n\n{{footer}}"
    )
    agent, model = bot([R("")], intro="INTRO", template=template, actions=(LOOKUP,))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    request = model.requests[0]
    assert request.system == f"INTRO\n\n{INSTRUCTIONS}"
    order = [
        "<contexts>",
        "<working-memory>",
        RESPONSE_FORMAT,
        'NEW:\n<updates count="1"/>',
        "TOOLS:\n<available-actions>",
    ]
    assert in_order(request.prompt, [*order, "<available-outputs>", FOOTER])
    assert request.prompt.startswith("<contexts>")
    assert request.prompt.count("<updates ") == 1 and "hi</input>" in section(request.prompt, "updates")


async def test_every_prompt_section_can_be_replaced() -> None:
    agent, model = bot([R("")], intro="INTRO", instructions="INSTRUCTIONS", response="RESPONSE", footer="FOOTER")
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert model.requests[0].system == "INTRO\n\nINSTRUCTIONS\n\nRESPONSE\n\nFOOTER"
    assert model.requests[0].prompt.endswith('</working-memory>\n\n<updates count="1"/>')


async def test_the_prompt_template_can_be_replaced() -> None:
    agent, model = bot([R("")], intro="INTRO", template="{{footer}}|{{intro}}", actions=(LOOKUP,))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    assert model.requests[0].system == f"{FOOTER}|INTRO"


async def test_available_actions_show_name_description_instructions_and_schema() -> None:
    weather = action(
        name="getWeather",
        description="Fetches the current weather.",
        instructions="Call it before answering about the weather.",
        schema=Weather,
        handler=lambda args, ctx, agent: "sunny",
    )
    agent, model = bot([R("")], actions=(weather,))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
    offered = section(model.requests[0].prompt, "available-actions")
    assert '<action name="getWeather">' in offered
    assert "<description>Fetches the current weather.</description>" in offered
    assert "<instructions>Call it before answering about the weather.</instructions>" in offered
    assert '"city": {"title": "City", "type": "string"}' in section(offered, "schema")


async def test_contexts_show_type_key_and_what_render_returns() -> None:
    session = context(
        type="session",
        schema=str,
        create=lambda state: {"lines": ["user1: Hi there!"]},
        render=lambda state: "\n".join(state.memory["lines"]),
    )
    agent, model = bot([R("")], contexts=(session,))
    async with agent:
        await agent.send(session, "session123", msg("hi"))
    block = section(model.requests[0].prompt, "contexts")
    assert '<context type="session" key="session123">' in block and "user1: Hi there!" in block


async def test_working_memory_shows_the_processed_logs_of_earlier_steps() -> None:
    lookup = action(name="lookupUser", handler=lambda args, ctx, agent: {"name": "Ada"})
    agent, model = bot(
        [
            R('<action_call name="lookupUser">{}</action_call><output type="chat:message">Looking</output>'),
            R(""),
        ],
        actions=(lookup,),
    )
    async with agent:
        await agent.send(chat, "u", msg("who am I?"))
    memory = section(model.requests[1].prompt, "working-memory")
    for tag in ("<input ", "<thought ", '<action_call name="lookupUser"', '<output type="chat:message"'):
        assert tag in memory
    assert '<action_result name="lookupUser"' in section(model.requests[1].prompt, "updates")


async def test_a_context_records_events_as_event_refs() -> None:
    from core import EventRef

    def save(args: Any, ctx: Any, agent: Any) -> str:
        ctx.emit("fact_saved", {"fact": "likes tea"})
        return "ok"

    agent, model = bot(
        [R('<action_call name="save">{}</action_call>'), R("")], actions=(action(name="save", handler=save),)
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("I like tea"))
    assert any(isinstance(c, EventRef) and c.name == "fact_saved" for c in chain)
    assert '<event name="fact_saved"' in model.requests[1].prompt


async def test_the_response_structure_is_parsed_into_thought_call_and_output() -> None:
    agent, _ = bot(
        [
            R(
                '<action_call name="getWeather">{"city": "Paris"}</action_call>'
                '<output type="chat:message">Checking</output>',
                reasoning="I need the weather first.",
            ),
            R(""),
        ],
        actions=(action(name="getWeather", schema=Weather, handler=lambda args, ctx, agent: "sunny"),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("weather?"))
    kinds = [type(c) for c in chain]
    assert set(kinds) == {InputRef, Thought, ActionCall, OutputRef, ActionResult}
    assert kinds.index(InputRef) < kinds.index(Thought) < kinds.index(ActionCall) < kinds.index(OutputRef)
    thought = chain[kinds.index(Thought)]
    assert isinstance(thought, Thought) and thought.content == "I need the weather first."


async def test_an_action_may_take_its_arguments_as_xml() -> None:
    weather = action(
        name="getWeather", schema=Weather, call_format="xml", handler=lambda args, ctx, agent: f"sunny in {args.city}"
    )
    agent, _ = bot([R('<action_call name="getWeather"><city>Paris</city></action_call>'), R("")], actions=(weather,))
    async with agent:
        chain = await agent.send(chat, "u", msg("weather?"))
    assert results(chain) == [("getWeather", "sunny in Paris", None)]


async def test_templates_read_the_context_memory() -> None:
    remember = context(type="mem", schema=str, create=lambda state: {"topic": "tea"})
    sent: list[str] = []
    agent, _ = bot(
        [R('<output type="chat:message">We talked about {{memory.topic}}</output>')], contexts=(remember,), sent=sent
    )
    async with agent:
        await agent.send(remember, "u", msg("hi"))
    assert sent == ["We talked about tea"]


async def test_templates_read_the_short_term_memory_under_the_seed_s_name() -> None:
    remember = context(type="mem", schema=str, create=lambda state: {"topic": "tea"})
    sent: list[str] = []
    agent, _ = bot(
        [R('<output type="chat:message">We talked about {{shortTermMemory.topic}}</output>')],
        contexts=(remember,),
        sent=sent,
    )
    async with agent:
        await agent.send(remember, "u", msg("hi"))
    assert sent == ["We talked about tea"]


# -- Agent Lifecycle ---------------------------------------------------------------------------------------


async def test_an_input_listener_starts_with_the_agent_and_sends() -> None:
    chains: list[Any] = []
    stopped: list[bool] = []

    async def subscribe(send: Any, agent: Any) -> Any:
        chains.append(await send(chat, "u", {"type": "chat:message", "data": "from outside"}))
        return lambda: stopped.append(True)

    listener = input(type="chat:message", subscribe=subscribe)
    agent, model = bot([R('<output type="chat:message">hello</output>')], inputs=(listener,))
    async with agent:
        assert chains and isinstance(chains[0][0], InputRef) and chains[0][0].data == "from outside"
    assert stopped == [True]
    assert "from outside" in section(model.requests[0].prompt, "updates")


async def test_create_gives_a_new_instance_its_memory_once() -> None:
    created: list[str] = []

    def create(state: Any) -> dict[str, Any]:
        created.append(state.id)
        return {"count": 0}

    def count(args: Any, ctx: Any, agent: Any) -> int:
        ctx.memory["count"] += 1
        return int(ctx.memory["count"])

    counter = context(type="counter", schema=str, create=create)
    agent, _ = bot(
        [R('<action_call name="count">{}</action_call>'), R("")] * 2,
        contexts=(counter,),
        actions=(action(name="count", handler=count),),
    )
    async with agent:
        await agent.send(counter, "a", msg("1"))
        chain = await agent.send(counter, "a", msg("2"))
    assert created == ["counter:a"]
    assert results(chain) == [("count", 2, None)]


async def test_actions_run_in_the_task_runner_within_their_concurrency() -> None:
    """Two at a time: each call waits until another runs beside it (a serial loop never gets there, and its calls
    fail), and a third never starts while two run."""
    running = [0, 0]
    pair = asyncio.Event()

    async def slow(args: Any, ctx: Any, agent: Any) -> str:
        running[0] += 1
        running[1] = max(running)
        try:
            if running[0] >= 2:
                pair.set()
            await asyncio.wait_for(pair.wait(), 10)
            for _ in range(5):  # room for a third call to start, were the limit not kept
                await asyncio.sleep(0)
        finally:
            running[0] -= 1
        return "done"

    two_at_a_time = action(name="slow", handler=slow, concurrency=2, queue="io")
    agent, _ = bot([R('<action_call name="slow">{}</action_call>' * 5), R("")], actions=(two_at_a_time,))
    async with agent:
        chain = await agent.send(chat, "u", msg("go"))
    assert results(chain) == [("slow", "done", None)] * 5
    assert running[1] == 2


async def test_a_fire_and_forget_action_is_not_waited_for() -> None:
    release = asyncio.Event()
    finished: list[str] = []

    async def notify(args: Any, ctx: Any, agent: Any) -> None:
        await release.wait()
        finished.append("sent")

    ping = action(name="notify", handler=notify, fire_and_forget=True)
    agent, model = bot(
        [R('<action_call name="notify">{}</action_call><output type="chat:message">ok</output>')], actions=(ping,)
    )
    async with agent:
        await asyncio.wait_for(agent.send(chat, "u", msg("ping me")), 30)
        assert finished == [] and len(model.requests) == 1
        release.set()
        for _ in range(100):
            if finished:
                break
            await asyncio.sleep(0.01)
    assert finished == ["sent"]


async def test_should_continue_keeps_stepping_with_nothing_left_to_process() -> None:
    keep = context(
        type="keep", schema=str, max_steps=3, should_continue=lambda state, agent: len(state.working_memory.logs) < 6
    )
    agent, model = bot([R("")] * 3, contexts=(keep,))
    async with agent:
        await agent.send(keep, "u", msg("hi"))
    assert len(model.requests) == 3


async def test_on_run_runs_when_the_run_completes_before_memory_is_saved() -> None:
    def on_run(state: Any, agent: Any) -> None:
        state.memory["runs"] = state.memory.get("runs", 0) + 1

    counted = context(type="counted", schema=str, on_run=on_run)
    agent, _ = bot([R(""), R("")], contexts=(counted,))
    async with agent:
        await agent.send(counted, "u", msg("1"))
        await agent.send(counted, "u", msg("2"))
        state = await agent.load_state(counted, "u")
    assert state.memory == {"runs": 2}


# -- Acts of Emergence 008: Agent/Output ---------------------------------------------------------------------


async def test_a_method_fixed_in_the_schema_is_kept() -> None:
    class Note(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        text: str
        output_path: Literal["†state.notes"] = Field(default="†state.notes", alias="_outputPath")
        output_method: Literal["push"] = Field(default="push", alias="_outputMethod")

    note = action(name="note", schema=Note, handler=lambda args, ctx, agent: args.text)
    agent, _ = bot(
        [
            R(
                '<action_call name="note">{"text": "a"}</action_call><action_call name="note">{"text": "b"}</action_call>'
            ),
            R(""),
        ],
        actions=(note,),
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        state = await agent.load_state(chat, "u")
    assert state.state_log.resolve(("state", "notes")) == (True, ["a", "b"])


async def test_the_state_log_is_append_only() -> None:
    agent, _ = bot(
        [
            R('<action_call name="echo">{"value": 1, "_outputPath": "†state.n"}</action_call>'),
            R('<action_call name="echo">{"value": 2, "_outputPath": "†state.n"}</action_call>'),
            R(""),
        ],
        actions=(echo_action(),),
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        state = await agent.load_state(chat, "u")
    assert [(e.path, e.data, e.method) for e in state.state_log.entries] == [
        (["state", "n"], 1, "set"),
        (["state", "n"], 2, "set"),
    ]
    assert state.state_log.resolve(("state", "n")) == (True, 2)


async def test_a_saved_result_carries_its_call_date_and_method_which_the_model_never_sees() -> None:
    agent, model = bot(
        [
            R(
                '<action_call name="echo">{"value": "inactive", "_outputPath": "†data.user.status", '
                '"_outputMethod": "push"}</action_call>'
            ),
            R(""),
        ],
        actions=(echo_action(),),
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        state = await agent.load_state(chat, "u")
    [entry] = state.state_log.dump()
    assert entry["type"] == "data" and entry["path"] == ["data", "user", "status"] and entry["data"] == "inactive"
    assert entry["_call"]["name"] == "echo" and "†data.user.status" in str(entry["_call"]["arguments"])
    assert isinstance(entry["_date"], int) and entry["_date"] > 0 and entry["_outputMethod"] == "push"
    shown = section(model.requests[1].prompt, "contexts")
    assert '"status": ["inactive"]' in shown
    assert not any(hidden in shown for hidden in ("_call", "_date", "_outputMethod"))


async def test_a_reference_waits_for_a_slow_earlier_call_that_rewrites_it() -> None:
    async def slow_save(args: Saved, ctx: Any, agent: Any) -> Any:
        await asyncio.sleep(0.05)
        return args.value

    agent, _ = bot(
        [
            R(""),
            R(
                '<action_call name="save">{"value": "new", "_outputPath": "†state.s"}</action_call>'
                '<action_call name="echo">{"value": "†state.s"}</action_call>'
            ),
            R(""),
        ],
        actions=(action(name="save", schema=Saved, handler=slow_save), echo_action()),
        inputs=(data_input(),),
    )
    async with agent:
        await agent.send(chat, "u", {"type": "data", "data": "old", "params": {"path": "†state.s"}})
        chain = await agent.send(chat, "u", msg("hi"))
    assert results(chain) == [("save", "new", None), ("echo", "new", None)]


async def test_state_can_be_seeded_and_read_through_the_state_log() -> None:
    """A ``†data.user.name`` argument receives the value (the state seeded here through the log itself; the
    public way, a data message, is the next test)."""
    agent, _ = bot(
        [R('<action_call name="echo">{"value": "†data.user.name"}</action_call>'), R("")], actions=(echo_action(),)
    )
    async with agent:
        state = await agent.load_state(chat, "u")
        state.state_log.append(("data",), {"user": {"name": "Alex", "status": "active"}})
        await agent.save_state(state)
        chain = await agent.send(chat, "u", msg("hi"))
    assert results(chain) == [("echo", "Alex", None)]


async def test_state_can_be_seeded_with_a_data_message_and_read_publicly() -> None:
    class Status(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        newStatus: str
        output_path: str = Field(alias="_outputPath", pattern="^†")

    seen: list[Any] = []

    def update(args: Status, ctx: Any, agent: Any) -> str:
        seen.append(read_state(ctx.state, "†data.user.name"))
        return args.newStatus

    agent, _ = bot(
        [
            R(""),
            R(
                '<action_call name="updateUserStatus">{"newStatus": "inactive", "_outputPath": "†data.user.status"}'
                "</action_call>"
            ),
            R(""),
        ],
        actions=(action(name="updateUserStatus", schema=Status, handler=update),),
        inputs=(data_input(),),
    )
    async with agent:
        await agent.send(chat, "u", {"type": "data", "data": {"user": {"name": "Alex", "status": "active"}}})
        await agent.send(chat, "u", msg("I am leaving"))
        state = await agent.load_state(chat, "u")
    assert seen == ["Alex"]
    assert read_state(state, "†data.user.status") == "inactive" and read_state(state, "†data.user.name") == "Alex"


async def test_a_variable_reference_inside_a_longer_string() -> None:
    agent, _ = bot(
        [
            R(
                '<action_call name="echo">{"value": "Ada", "_outputPath": "†state.user.name"}</action_call>'
                '<action_call name="echo">{"value": "Hi †state.user.name, welcome"}</action_call>'
            ),
            R(""),
        ],
        actions=(echo_action(),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    assert ("echo", "Hi Ada, welcome", None) in results(chain)


async def test_a_deferred_reference_waits_for_a_later_call() -> None:
    agent, _ = bot(
        [
            R(
                '<action_call name="echo">{"value": "†state.s"}</action_call>'
                '<action_call name="echo">{"value": "later", "_outputPath": "†state.s"}</action_call>'
            ),
            R(""),
        ],
        actions=(echo_action(),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
    assert results(chain) == [("echo", "later", None), ("echo", "later", None)]


async def test_a_call_without_an_output_path_saves_nothing() -> None:
    agent, model = bot(
        [R('<action_call name="echo">{"value": "a thought"}</action_call>'), R("")], actions=(echo_action(),)
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("hi"))
        state = await agent.load_state(chat, "u")
    assert results(chain) == [("echo", "a thought", None)]
    assert state.state_log.entries == []
    assert "a thought" in section(model.requests[1].prompt, "updates")


async def test_a_call_without_an_output_path_may_be_fire_and_forget() -> None:
    release = asyncio.Event()
    done: list[Any] = []

    async def log_event(args: Saved, ctx: Any, agent: Any) -> str:
        if args.output_path is None:
            await release.wait()
        done.append(args.value)
        return "logged"

    act = action(name="log", schema=Saved, handler=log_event, fire_and_forget="without_output_path")
    agent, _ = bot(
        [
            R(
                '<action_call name="log">{"value": "x"}</action_call>'
                '<action_call name="log">{"value": "y", "_outputPath": "†state.y"}</action_call>'
            ),
            R(""),
        ],
        actions=(act,),
    )
    async with agent:
        chain = await asyncio.wait_for(agent.send(chat, "u", msg("hi")), 30)
        assert results(chain) == [("log", "logged", None)] and done == ["y"]
        release.set()
        for _ in range(100):
            if len(done) == 2:
                break
            await asyncio.sleep(0.01)
    assert sorted(done) == ["x", "y"]


async def test_or_in_an_output_path_writes_the_first_empty_path() -> None:
    call = '<action_call name="echo">{{"value": {v}, "_outputPath": "†state.first || †state.second"}}</action_call>'
    agent, _ = bot([R(call.format(v=1) + call.format(v=2)), R("")], actions=(echo_action(),))
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        state = await agent.load_state(chat, "u")
    assert state.state_log.folded() == {"state": {"first": 1, "second": 2}}


async def test_and_in_an_output_path_writes_every_path() -> None:
    agent, _ = bot(
        [R('<action_call name="echo">{"value": 7, "_outputPath": "†state.a && †state.b"}</action_call>'), R("")],
        actions=(echo_action(),),
    )
    async with agent:
        await agent.send(chat, "u", msg("hi"))
        state = await agent.load_state(chat, "u")
    assert state.state_log.folded() == {"state": {"a": 7, "b": 7}}


def plan_actions(barrier: asyncio.Barrier, b_may_finish: asyncio.Event) -> tuple[Any, ...]:
    async def fetch_a(args: Saved, ctx: Any, agent: Any) -> str:
        await asyncio.wait_for(barrier.wait(), 30)  # runs at the same time as fetch_b
        return "A"

    async def fetch_b(args: Saved, ctx: Any, agent: Any) -> str:
        await asyncio.wait_for(barrier.wait(), 30)
        await asyncio.wait_for(b_may_finish.wait(), 30)  # only after use_a: use_a waits for fetch_a alone
        return "B"

    def use_a(args: Saved, ctx: Any, agent: Any) -> str:
        b_may_finish.set()
        return f"used {args.value}"

    return (
        action(name="fetch_a", schema=Saved, handler=fetch_a),
        action(name="fetch_b", schema=Saved, handler=fetch_b),
        action(name="use_a", schema=Saved, handler=use_a),
        action(name="join", schema=Saved, handler=lambda args, ctx, agent: "+".join(args.value)),
    )


FETCH_A = '<action_call name="fetch_a">{"_outputPath": "†state.a"}</action_call>'
FETCH_B = '<action_call name="fetch_b">{"_outputPath": "†state.b"}</action_call>'
USE_A = '<action_call name="use_a">{"value": "†state.a"}</action_call>'
JOIN = '<action_call name="join">{"value": ["†state.a", "†state.b"]}</action_call>'


async def test_a_plan_written_in_dependency_order_runs_as_a_graph() -> None:
    actions = plan_actions(asyncio.Barrier(2), asyncio.Event())
    agent, _ = bot([R(FETCH_A + FETCH_B + USE_A + JOIN), R("")], actions=actions)
    async with agent:
        chain = await agent.send(chat, "u", msg("plan"))
    assert sorted(results(chain)) == [
        ("fetch_a", "A", None),
        ("fetch_b", "B", None),
        ("join", "A+B", None),
        ("use_a", "used A", None),
    ]


async def test_a_plan_in_any_order_runs_as_a_dependency_graph() -> None:
    actions = plan_actions(asyncio.Barrier(2), asyncio.Event())
    agent, _ = bot([R(JOIN + USE_A + FETCH_B + FETCH_A), R("")], actions=actions)
    async with agent:
        chain = await agent.send(chat, "u", msg("plan"))
    assert sorted(results(chain)) == [
        ("fetch_a", "A", None),
        ("fetch_b", "B", None),
        ("join", "A+B", None),
        ("use_a", "used A", None),
    ]


async def test_instancing_runs_copies_in_parallel_and_gathers_their_results() -> None:
    barrier = asyncio.Barrier(2)

    async def weather(args: Weather, ctx: Any, agent: Any) -> dict[str, str]:
        await asyncio.wait_for(barrier.wait(), 30)  # both copies run at once
        return {"city": args.city, "sky": "sunny"}

    class Cities(BaseModel):
        model_config = ConfigDict(populate_by_name=True)
        city: str
        output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")

    agent, _ = bot(
        [
            R(
                '<action_call name="weather">{"_instances": [{"city": "Paris"}, {"city": "Rome"}], '
                '"_outputPath": "†state.weather"}</action_call>'
            ),
            R(""),
        ],
        actions=(action(name="weather", schema=Cities, handler=weather),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("weather in Paris and Rome?"))
        state = await agent.load_state(chat, "u")
    gathered = [{"city": "Paris", "sky": "sunny"}, {"city": "Rome", "sky": "sunny"}]
    assert results(chain) == [("weather", gathered, None)]
    assert state.state_log.resolve(("state", "weather")) == (True, gathered)


async def test_each_instanced_copy_writes_into_its_own_workspace() -> None:
    barrier = asyncio.Barrier(2)

    async def visit(args: Weather, ctx: Any, agent: Any) -> Any:
        write_state(ctx.state, "†state.visited", args.city, method="push")
        await asyncio.wait_for(barrier.wait(), 30)  # both copies have written: neither sees the other's write
        return read_state(ctx.state, "†state.visited")

    agent, _ = bot(
        [
            R('<action_call name="visit">{"_instances": [{"city": "Paris"}, {"city": "Rome"}]}</action_call>'),
            R(""),
        ],
        actions=(action(name="visit", schema=Weather, handler=visit),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("go"))
        state = await agent.load_state(chat, "u")
    assert results(chain) == [("visit", [["Paris"], ["Rome"]], None)]
    assert read_state(state, "†state.visited") == ["Paris", "Rome"]


# -- Ailoy: Agent Response Format ----------------------------------------------------------------------------


async def events_of(replies: list[str], **kw: Any) -> list[RunEvent]:
    agent, _ = bot(replies, chunk_size=4, **kw)
    async with agent:
        return [e async for e in agent.stream(chat, "u", msg("hi"))]


async def test_a_tool_call_is_a_dict_naming_the_action_and_its_arguments() -> None:
    add = action(name="add", schema=dict[str, int], handler=lambda args, ctx, agent: {"sum": sum(args.values())})
    events = await events_of([R('<action_call name="add">{"a": 1, "b": 2}</action_call>'), R("")], actions=(add,))
    call = next(e for e in events if e.type == RunEventType.TOOL_CALL)
    result = next(e for e in events if e.type == RunEventType.TOOL_CALL_RESULT)
    assert (
        call.role == "assistant" and call.content["name"] == "add" and call.content["arguments"] == '{"a": 1, "b": 2}'
    )
    assert result.role == "tool" and result.content == {"id": call.content["id"], "name": "add", "result": {"sum": 3}}


async def test_output_text_streams_as_deltas_before_the_output_closes() -> None:
    events = await events_of([R('<output type="chat:message">Hello there, Ada</output>')])
    texts = [e for e in events if e.type == RunEventType.OUTPUT_TEXT]
    [done] = [e for e in events if e.type == RunEventType.OUTPUT_TEXT_DONE]
    assert len(texts) > 2 and events.index(done) > events.index(texts[-1]) and done.final
    assert "".join(e.content for e in texts) == "Hello there, Ada" == done.content
    assert texts[0].is_type_switched and all(isinstance(e.content, str) for e in texts)


async def test_output_text_pieces_join_to_the_text_exactly_once() -> None:
    """A consumer that joins every ``output_text`` event gets each output's text once: the complete text comes in
    an event of its own type (``output_text_done``), which a consumer of the five Ailoy types skips."""
    events = await events_of(
        [R('<output type="chat:message">It is sunny in Oslo.</output><output type="chat:message">Bye.</output>')]
    )
    assert "".join(e.content for e in events if e.type == "output_text") == "It is sunny in Oslo.Bye."
    assert [e.content for e in events if e.type == "output_text_done"] == ["It is sunny in Oslo.", "Bye."]


async def test_a_fire_and_forget_call_has_its_tool_call_result() -> None:
    release = asyncio.Event()

    async def notify(args: Any, ctx: Any, agent: Any) -> None:
        await release.wait()

    ping = action(name="notify", handler=notify, fire_and_forget=True)
    agent, _ = bot([R('<action_call name="notify">{}</action_call>')], actions=(ping,))
    async with agent:
        events = [e async for e in agent.stream(chat, "u", msg("ping me"))]
        release.set()
    [call] = [e.content for e in events if e.type == RunEventType.TOOL_CALL]
    [result] = [e for e in events if e.type == RunEventType.TOOL_CALL_RESULT]
    assert result.role == "tool"
    assert result.content == {"id": call["id"], "name": "notify", "result": None, "background": True}


async def test_is_type_switched_is_true_on_the_first_event_of_a_new_type_only() -> None:
    """To the letter of the format by default; a box per output, call and result with ``switched="item"``."""

    def adder() -> Any:
        both, started = asyncio.Event(), []

        async def add(args: dict[str, int], ctx: Any, agent: Any) -> int:
            started.append(args)
            if len(started) == 2:
                both.set()
            await both.wait()  # the two results come after the two calls
            return sum(args.values())

        return action(name="add", schema=dict[str, int], handler=add)

    calls = '<action_call name="add">{"a": 1}</action_call><action_call name="add">{"a": 2}</action_call>'
    replies = [R(calls, reasoning=""), R('<output type="chat:message">3</output>', reasoning="")]
    events = await events_of(replies, actions=(adder(),))
    kinds = [str(e.type) for e in events]
    assert kinds == [
        "tool_call",
        "tool_call",
        "tool_call_result",
        "tool_call_result",
        "output_text",
        "output_text_done",
    ]
    assert [e.is_type_switched for e in events] == [True, False, True, False, True, True]
    agent, _ = bot(replies, chunk_size=4, actions=(adder(),))
    async with agent:
        boxes = [e async for e in agent.stream(chat, "v", msg("hi"), switched="item")]
    assert [str(e.type) for e in boxes] == kinds
    assert [e.is_type_switched for e in boxes] == [True, True, True, True, True, False]


async def test_an_error_is_the_last_event_and_says_why() -> None:
    agent, _ = bot([ModelError("provider down")])
    async with agent:
        events = [e async for e in agent.stream(chat, "u", msg("hi"))]
    assert events[-1].type == RunEventType.ERROR and "provider down" in events[-1].content
    assert events[-1].role == "assistant"


async def test_each_new_output_starts_with_is_type_switched() -> None:
    events = await events_of([R('<output type="chat:message">one</output><output type="chat:message">two</output>')])
    firsts = {}
    for e in events:
        if e.type == RunEventType.OUTPUT_TEXT and not e.final:
            firsts.setdefault(e.output_index, e)
    assert len(firsts) == 2 and all(e.is_type_switched for e in firsts.values())


async def test_deltas_carry_resolved_templates() -> None:
    add = action(name="add", schema=dict[str, int], handler=lambda args, ctx, agent: {"sum": sum(args.values())})
    events = await events_of(
        [
            R(
                '<action_call name="add">{"a": 1, "b": 2}</action_call><output type="chat:message">sum={{calls[0].sum}}'
                "</output>"
            )
        ],
        actions=(add,),
    )
    deltas = [e.content for e in events if e.type == RunEventType.OUTPUT_TEXT and not e.final]
    assert "".join(deltas) == "sum=3"


async def test_the_final_event_is_the_delivered_text_whatever_the_handler_returns() -> None:
    def send(data: str, ctx: Any, agent: Any) -> dict[str, Any]:
        return {"data": {"content": data, "channelId": "42"}}

    events = await events_of([R('<output type="m">Hello</output>')], outputs=(output(type="m", handler=send),))
    final = next(e for e in events if e.type == RunEventType.OUTPUT_TEXT_DONE)
    assert final.content == "Hello"


# -- Issue 22, beyond the seeds ------------------------------------------------------------------------------


async def test_a_model_repeating_itself_gets_one_reply_to_the_user_and_the_run_ends() -> None:
    sent: list[str] = []
    remember = action(name="remember", schema=dict[str, str], handler=lambda args, ctx, agent: "ok")
    agent, model = bot(
        [
            R(
                '<action_call name="remember">{"fact": "likes tea"}</action_call><output type="chat:message">Noted.</output>'
            )
        ],
        actions=(remember,),
        sent=sent,
        plugins=[LoopGuard()],
    )
    model.repeat_last = True
    async with agent:
        chain = await agent.send(chat, "u", msg("I like tea"))
    assert sent == ["Noted."]
    assert len(model.requests) == 2
    assert any(isinstance(c, ActionResult) and c.error for c in chain), "the repeated call is refused to the model"


@pytest.mark.parametrize(
    ("define", "named"),
    [
        (
            lambda: action(name="lookup", schema={"type": "object"}, handler=lambda a, c, g: None),
            "action 'lookup' schema:",
        ),
        (lambda: output(type="card", schema={"type": "object"}), "output 'card' schema:"),
        (lambda: output(type="card", attributes={"type": "object"}), "output 'card' attributes:"),
        (lambda: context(type="room", schema={"type": "object"}), "context 'room' schema:"),
    ],
    ids=["action schema", "output schema", "output attributes", "context schema"],
)
def test_a_json_schema_dict_where_a_model_is_expected_gets_our_error(define: Any, named: str) -> None:
    with pytest.raises(DefinitionError) as info:
        define()
    message = str(info.value)
    assert message.startswith(named) and "external_schema({...})" in message
    assert info.value.__cause__ is None, "pydantic's own error is not chained into ours"


async def test_an_error_in_render_names_the_context() -> None:
    def render(state: Any) -> str:
        raise KeyError("lines")

    broken = context(type="broken", schema=str, render=render)
    agent, _ = bot([R("")], contexts=(broken,))
    async with agent:
        chain = await agent.send(broken, "u", msg("hi"))
    error = chain[-1]
    assert isinstance(error, ErrorLog) and "'broken'" in error.message and "render" in error.message
