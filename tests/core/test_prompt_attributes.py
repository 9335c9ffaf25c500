"""An input entry shows the attributes the model can use (issue 51): not those the input marks ``hidden`` (what goes
without saying where it was received: the person's id in a one-person chat, the tier everyone there has), nor the
message id where nothing the bot has takes one; code still reads them all in ``params``. An output, the bot's own
answer, shows no time of its own."""

from __future__ import annotations

from pydantic import BaseModel

from core import InMemoryStore, ScriptedModel, action, context, create_agent, output
from core.entries import InputRef, OutputRef
from core.prompt import format_log, quiet_params

REPLY = '<response><output type="say">noted</output></response>'
MESSAGE = {
    "type": "say",
    "data": "hello",
    "params": {"user": "Ann", "user_id": "7", "message_id": "m1", "tier": "member"},
    "hidden": ["user_id", "tier"],
}


class Pin(BaseModel):
    message_id: str


pin = action(name="pin", description="Pins a message", schema=Pin, handler=lambda args, ctx, agent: "pinned")


async def _first_prompt(*, actions: list) -> tuple[str, InputRef]:  # type: ignore[type-arg]
    chat = context(type="chat", schema=str, key=lambda s: s)
    model = ScriptedModel(lambda request: REPLY)
    memory = InMemoryStore()
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=actions,
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        memory=memory,
    )
    async with agent:
        await agent.send(chat, "room", MESSAGE)
        state = await agent.load_state(chat, "room")
    [entry] = [log for log in state.working_memory.logs if isinstance(log, InputRef)]
    return model.requests[0].prompt, entry


async def test_an_input_shows_neither_what_it_hides_nor_a_message_id_nothing_takes() -> None:
    prompt, entry = await _first_prompt(actions=[])
    assert '<input type="say" user="Ann" timestamp="' in prompt
    assert "user_id=" not in prompt and "tier=" not in prompt and "message_id=" not in prompt
    assert entry.params == MESSAGE["params"]  # (kept for the code that reads them: trust, facts, deletions)


async def test_the_message_id_is_shown_where_an_action_takes_one() -> None:
    prompt, _ = await _first_prompt(actions=[pin])
    assert 'message_id="m1"' in prompt and "user_id=" not in prompt


def test_the_quiet_params_come_from_every_schema_an_action_or_output_has() -> None:
    say = output(type="say", handler=lambda data, ctx, agent: None)
    assert quiet_params([], [say]) == frozenset({"message_id"})
    assert quiet_params([pin], [say]) == frozenset()
    tagged = output(type="edit", attributes=Pin, handler=lambda data, ctx, agent: None)  # (an output's attributes)
    assert quiet_params([], [say, tagged]) == frozenset()


def test_an_output_shows_no_time_and_an_input_keeps_its_own() -> None:
    answer = OutputRef(type="say", content="hi", timestamp=0)
    assert format_log(answer) == '<output type="say">hi</output>'
    said = InputRef(type="say", data="hi", params={"user": "Ann", "tier": "guest"}, hidden=["tier"], timestamp=0)
    assert format_log(said) == '<input type="say" user="Ann" timestamp="1970-01-01T00:00:00Z">hi</input>'
    assert (
        format_log(said, quiet=frozenset({"user"})) == '<input type="say" timestamp="1970-01-01T00:00:00Z">hi</input>'
    )
