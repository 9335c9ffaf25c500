"""The behaviours of issue 39 part B (docs/fidelity.md): instanced copies that keep their writes apart, references
that wait for a later input, working memory for one run, and a run over several contexts."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core import ActionResult, Bot, ContextUse, action, context, data_input, read_state, write_state
from core.bot import layer

from .kit import R, bot, chat, msg, section


def results(chain: list[Any]) -> list[ActionResult]:
    return [c for c in chain if isinstance(c, ActionResult)]


class City(BaseModel):
    """An action's arguments whose result may be saved anywhere (a flexible ``_outputPath``)."""

    model_config = ConfigDict(populate_by_name=True)
    city: str
    output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")


class Plain(BaseModel):
    city: str


# -- instancing (Acts of Emergence 008) -------------------------------------------------------------------


async def test_copies_that_set_one_scalar_path_leave_the_list_of_their_values() -> None:
    barrier = asyncio.Barrier(3)

    async def note(args: Plain, ctx: Any, agent: Any) -> str:
        write_state(ctx.state, "†state.scratch", f"seen {args.city}")
        await asyncio.wait_for(barrier.wait(), 30)  # every copy has written: none sees another's write
        return str(read_state(ctx.state, "†state.scratch"))

    agent, _ = bot(
        [
            R(
                '<action_call name="note">{"_instances": [{"city": "Paris"}, {"city": "Rome"}, {"city": "Oslo"}]}'
                "</action_call>"
            ),
            R(""),
        ],
        actions=(action(name="note", schema=Plain, handler=note),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("go"))
        state = await agent.load_state(chat, "u")
    [result] = results(chain)
    assert result.data == ["seen Paris", "seen Rome", "seen Oslo"]  # each copy read its own write
    assert read_state(state, "†state.scratch") == ["seen Paris", "seen Rome", "seen Oslo"]  # none lost
    assert result.text is not None and "copies 0, 1, 2 each wrote †state.scratch" in result.text


async def test_a_copy_writing_above_another_copys_path_is_gathered_too() -> None:
    async def note(args: Plain, ctx: Any, agent: Any) -> None:
        if args.city == "Paris":
            write_state(ctx.state, "†state.trip", {"first": "Paris"})
        else:
            write_state(ctx.state, "†state.trip.last", args.city)

    agent, _ = bot(
        [R('<action_call name="note">{"_instances": [{"city": "Paris"}, {"city": "Rome"}]}</action_call>'), R("")],
        actions=(action(name="note", schema=Plain, handler=note),),
    )
    async with agent:
        await agent.send(chat, "u", msg("go"))
        state = await agent.load_state(chat, "u")
    assert read_state(state, "†state.trip") == [{"first": "Paris"}, {"last": "Rome"}]


async def test_each_copy_saves_its_result_to_its_own_output_path() -> None:
    agent, _ = bot(
        [
            R(
                '<action_call name="weather">{"_instances": ['
                '{"city": "Paris", "_outputPath": "†state.w.paris"}, {"city": "Rome", "_outputPath": "†state.w.rome"}'
                "]}</action_call>"
            ),
            R(""),
        ],
        actions=(action(name="weather", schema=City, handler=lambda args, ctx, agent: f"sunny in {args.city}"),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("weather?"))
        state = await agent.load_state(chat, "u")
    assert read_state(state, "†state.w") == {"paris": "sunny in Paris", "rome": "sunny in Rome"}
    [result] = results(chain)
    assert result.data == ["sunny in Paris", "sunny in Rome"] and result.error is None
    assert result.text is not None and "(saved to †state.w.rome)" in result.text


async def test_copies_naming_one_output_path_are_gathered_not_collapsed() -> None:
    agent, _ = bot(
        [
            R(
                '<action_call name="weather">{"_instances": ['
                '{"city": "Paris", "_outputPath": "†state.w"}, {"city": "Rome", "_outputPath": "†state.w"}, '
                '{"city": "Oslo", "_outputPath": "†state.oslo"}]}</action_call>'
            ),
            R(""),
        ],
        actions=(action(name="weather", schema=City, handler=lambda args, ctx, agent: args.city),),
    )
    async with agent:
        await agent.send(chat, "u", msg("weather?"))
        state = await agent.load_state(chat, "u")
    assert read_state(state, "†state.w") == ["Paris", "Rome", None]
    assert read_state(state, "†state.oslo") == "Oslo"


async def test_a_copys_output_path_on_an_action_that_takes_none_is_an_error_the_model_reads() -> None:
    agent, _ = bot(
        [
            R(
                '<action_call name="weather">{"_instances": [{"city": "Paris", "_outputPath": "†state.p"}]}'
                "</action_call>"
            ),
            R(""),
        ],
        actions=(action(name="weather", schema=Plain, handler=lambda args, ctx, agent: args.city),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("weather?"))
    [result] = results(chain)
    assert result.error is not None and "takes no _outputPath" in result.error


# -- a reference to data not written yet (Acts of Emergence 008) ----------------------------------------------


class Greeting(BaseModel):
    name: str


def greet_action(**kw: Any) -> Any:
    return action(name="greet", schema=Greeting, handler=lambda args, ctx, agent: f"Hello {args.name}", **kw)


async def test_a_reference_waits_for_the_input_that_supplies_it() -> None:
    asked = asyncio.Event()

    def first(request: Any) -> str:
        asked.set()
        return R('<action_call name="greet">{"name": "†data.user.name"}</action_call>')

    agent, _ = bot([first, R(""), R("")], actions=(greet_action(wait_for_input=30),), inputs=(data_input(),))
    async with agent:
        run = asyncio.ensure_future(agent.send(chat, "u", msg("greet me")))
        await asyncio.wait_for(asked.wait(), 10)
        for _ in range(20):  # let the call reach its wait: nothing has written the name yet
            await asyncio.sleep(0)
        assert not run.done()
        await agent.send(chat, "u", {"type": "data", "data": {"user": {"name": "Ada"}}})
        chain = await asyncio.wait_for(run, 10)
    [result] = results(chain)
    assert (result.data, result.error) == ("Hello Ada", None)


async def test_a_reference_no_input_supplies_in_time_fails_with_a_clear_result() -> None:
    agent, _ = bot(
        [R('<action_call name="greet">{"name": "†data.user.name"}</action_call>'), R("")],
        actions=(greet_action(wait_for_input=0.05),),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("greet me"))
    [result] = results(chain)
    assert result.error is not None
    assert "†data.user.name has no value" in result.error and "no input supplied it within 0.05s" in result.error


async def test_without_a_wait_a_reference_nothing_writes_still_fails_at_once() -> None:
    agent, _ = bot(
        [R('<action_call name="greet">{"name": "†data.user.name"}</action_call>'), R("")], actions=(greet_action(),)
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("greet me"))
    [result] = results(chain)
    assert result.error is not None and "no input supplied" not in result.error


# -- working memory for one run (Agent Lifecycle) -------------------------------------------------------------


async def test_working_memory_is_temporary_for_one_run_when_the_context_asks() -> None:
    once = context(type="once", schema=str, key=lambda s: s, working_memory="run")
    say = '<output type="chat:message">noted</output>'
    agent, model = bot([R(say), R(say)], contexts=(once,))
    async with agent:
        await agent.send(once, "u", msg("my code word is heron"))
        await agent.send(once, "u", msg("what was my code word?"))
        saved = str(await agent.memory.get("working:once:u"))
        state = await agent.load_state(once, "u")
    second = section(model.requests[1].prompt, "working-memory")
    assert "heron" not in second and "noted" not in second  # nothing of run 1
    assert "code word?" in section(model.requests[1].prompt, "updates")
    assert "code word?" in saved and "heron" not in saved  # run 2's working memory is saved, run 1's is gone
    assert state.working_memory.logs == []  # a new run starts empty


async def test_the_window_across_runs_is_the_default_and_a_bot_context_carries_the_choice() -> None:
    say = '<output type="chat:message">noted</output>'
    agent, model = bot([R(say), R(say)])
    async with agent:
        await agent.send(chat, "u", msg("my code word is heron"))
        await agent.send(chat, "u", msg("what was my code word?"))
    assert "heron" in section(model.requests[1].prompt, "working-memory")
    own = context(type="own", schema=str, working_memory="run")
    assert chat.working_memory == "window" and layer(chat, own).working_memory == "run"


# -- several contexts in one run (Prompting, Agent Lifecycle) -------------------------------------------------


class Where(BaseModel):
    channel: str
    user: str


class Name(BaseModel):
    name: str


profile = context(
    type="profile",
    schema=str,
    key=lambda user: user,
    create=lambda state: {"name": None},
    render=lambda state: f"<profile>name: {state.memory['name']}</profile>",
)


def remember_name(args: Name, ctx: Any, agent: Any) -> str:
    ctx.state.using(profile).memory["name"] = args.name
    return "kept"


channel = context(
    type="channel",
    schema=Where,
    key=lambda w: w.channel,
    uses=lambda state: [ContextUse(context=profile, args=state.args.user)],
)
remember = action(name="remember_name", schema=Name, handler=remember_name, context=profile)


async def test_a_run_uses_another_context_renders_it_gives_it_to_actions_and_saves_it() -> None:
    say = '<output type="chat:message">ok</output>'
    agent, model = bot(
        [R('<action_call name="remember_name">{"name": "Ada"}</action_call>'), R(say), R(say)],
        contexts=(channel, profile),
        actions=(remember,),
    )
    async with agent:
        chain = await agent.send(channel, {"channel": "c1", "user": "ada"}, msg("call me Ada"))
        await agent.send(channel, {"channel": "c2", "user": "ada"}, msg("who am I?"))  # another channel
        kept = await agent.load_state(profile, "ada")
    assert [(r.data, r.error) for r in results(chain)] == [("kept", None)]  # offered: the profile's own action
    first = section(model.requests[0].prompt, "contexts")
    assert '<context type="channel" key="c1">' in first and '<context type="profile" key="ada">' in first
    assert "name: None" in first
    assert "name: Ada" in section(model.requests[2].prompt, "contexts")  # saved with run 1, loaded in c2
    assert kept.memory == {"name": "Ada"}


async def test_a_bot_composes_its_context_with_another() -> None:
    own = context(type="own", schema=str, uses=lambda state: [ContextUse(context=profile, args="ada")])
    room = context(type="room", schema=str, key=lambda s: s, conversation=True)  # a platform's chat
    laid = layer(room, own)
    assert laid.uses is own.uses and laid.type == "room"
    say = '<output type="chat:message">ok</output>'
    agent, model = bot([R(say)], contexts=(room,), bot=Bot(context=own, contexts=(profile,)))
    async with agent:
        await agent.send(room, "u", msg("hi"))
    assert '<context type="profile" key="ada">' in section(model.requests[0].prompt, "contexts")


async def test_a_used_context_the_agent_does_not_have_is_named() -> None:
    agent, _ = bot([R("")], contexts=(channel,))
    async with agent:
        try:
            await agent.send(channel, {"channel": "c1", "user": "ada"}, msg("hi"))
        except Exception as exc:
            assert "uses context 'profile', which the agent does not have" in str(exc)
        else:
            raise AssertionError("the run went on without the profile")


async def test_the_compact_prompt_of_a_small_model_shows_the_contexts_a_run_uses_too() -> None:
    agent, model = bot(["Hello Ada."], contexts=(channel, profile), compact_prompt=True)
    async with agent:
        await agent.send(channel, {"channel": "c1", "user": "ada"}, msg("hi"))
    assert "What the profile context keeps:\n<profile>name: None</profile>" in model.requests[0].system


async def test_a_later_call_reading_a_copys_own_output_path_waits_for_it() -> None:
    async def weather(args: City, ctx: Any, agent: Any) -> str:
        await asyncio.sleep(0.05)  # slower than the call after it is read
        return f"sunny in {args.city}"

    agent, _ = bot(
        [
            R(
                '<action_call name="weather">{"_instances": [{"city": "Paris", "_outputPath": "†state.w.paris"}, '
                '{"city": "Rome", "_outputPath": "†state.w.rome"}]}</action_call>'
                '<action_call name="greet">{"name": "†state.w.rome"}</action_call>'
            ),
            R(""),
        ],
        actions=(action(name="weather", schema=City, handler=weather), greet_action()),
    )
    async with agent:
        chain = await agent.send(chat, "u", msg("weather?"))
    assert [(r.name, r.error) for r in results(chain)] == [("weather", None), ("greet", None)]
    assert results(chain)[1].data == "Hello sunny in Rome"
