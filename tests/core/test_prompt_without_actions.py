"""A prompt no larger than it needs to be (issue 51): a step that offers no action carries no action syntax (no
<available-actions>, no <action_call>, no {{calls[0]...}} or _outputPath), unless the bot author wrote those texts."""

from __future__ import annotations

from core import AgentOptions, ScriptedModel, action, context, create_agent, output
from core.prompt import RESPONSE_FORMAT_WITHOUT_ACTIONS

talk = context(type="talk", schema=str, key=lambda s: s)
say = output(type="say", description="A message to the user", handler=lambda d, c, a: None)
REPLY = '<response><output type="say">ok</output></response>'


async def _prompt(**kw: object) -> str:
    model = ScriptedModel(lambda request: REPLY)
    agent = create_agent(model=model, contexts=[talk], outputs=[say], **kw)  # type: ignore[arg-type]
    async with agent:
        await agent.send(talk, "one", {"type": "talk:message", "data": "hello"})
    request = model.requests[0]
    return request.system + "\n" + request.prompt


async def test_a_bot_with_no_actions_gets_no_action_syntax() -> None:
    prompt = await _prompt()
    for absent in ("<available-actions>", "action_call", "{{calls[0]", "_outputPath", "action results"):
        assert absent not in prompt, absent
    assert RESPONSE_FORMAT_WITHOUT_ACTIONS in prompt and "<available-outputs>" in prompt


async def test_a_bot_with_an_action_gets_its_syntax() -> None:
    lookup = action(name="lookup", description="Looks a word up", schema=str, handler=lambda a, c, h: "found")
    prompt = await _prompt(actions=[lookup])
    assert "<available-actions>" in prompt and "<action_call" in prompt and "_outputPath" in prompt


async def test_an_authors_own_response_format_is_kept_without_actions() -> None:
    prompt = await _prompt(options=AgentOptions(response="Write <action_call> if you must."))
    assert "Write <action_call> if you must." in prompt
