"""A tool-using bot: the model calls actions and answers with what they return.

The bot has no context of its own: its actions and its output are offered in every chat of every platform, beside
the platform's reply. ``weather`` saves its result to the chat's state (a fixed ``_outputPath``, ``†state.weather``),
so the last forecast stays in front of the model in the next turns; ``weather:report`` shows it, posted with
``agent.say`` on whatever platform the chat is.

Run it as a bot (``bots run examples/tool_bot.py``), or as a scripted demo: ``python examples/tool_bot.py`` talks to
a scripted model (``ScriptedModel``, the answers below), so it needs no key and no network, and prints the
conversation with each tool call. To talk to a real model, give ``create_agent`` another ``model=``
(``core.models.OpenAICompatModel``, ``AnthropicModel``, ``LocalModel``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core import (
    ActionContext,
    Bot,
    Host,
    OutputContext,
    RunEvent,
    RunEventType,
    ScriptedModel,
    action,
    create_agent,
    output,
    read_state,
)


class City(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    city: str
    output_path: Literal["†state.weather"] = Field(default="†state.weather", alias="_outputPath")
    """Where the result is saved: fixed (a ``const`` in the schema the model reads)."""


class Numbers(BaseModel):
    a: int
    b: int


def get_weather(args: City, ctx: ActionContext, agent: Host) -> dict[str, Any]:
    """The action's handler: its return value is the result the model reads in its next step."""
    return {"city": args.city, "sky": "sunny", "celsius": 21}


def multiply(args: Numbers, ctx: ActionContext, agent: Host) -> dict[str, int]:
    return {"product": args.a * args.b}


async def report(text: str, ctx: OutputContext, agent: Host) -> None:
    """The last forecast saved in the chat's state, with the model's words, posted on the chat's platform."""
    saved = read_state(ctx.state, "†state.weather", None)
    if saved is None:
        raise ValueError("no forecast yet: call weather first")  # the model reads this and can try again
    await agent.say(ctx.state, f"{saved['city']}: {saved['sky']}, {saved['celsius']} °C. {text}".strip())


weather = action(name="weather", description="The current weather in a city.", schema=City, handler=get_weather)
calculator = action(name="multiply", description="Multiply two numbers.", schema=Numbers, handler=multiply)
weather_report = output(
    type="weather:report",
    description="Shows the last forecast looked up (with weather), followed by a comment of yours.",
    handler=report,
    examples=['<output type="weather:report">A good day for a walk.</output>'],
)

bot = Bot(
    name="tools",
    instructions="Look the weather up with weather and show it with weather:report; multiply with multiply.",
    actions=[weather, calculator],
    outputs=[weather_report],
)
"""What ``bots run examples/tool_bot.py`` runs."""

CONVERSATION = [
    # What the user says, and what the (scripted) model answers at each step of the run that message starts.
    (
        "What's the weather in Paris?",
        [
            "<response><reasoning>I need the weather first.</reasoning>"
            '<action_call name="weather">{"city": "Paris"}</action_call></response>',
            # the next step shows the model the action's result as its update, and the saved state
            '<response><output type="weather:report">A good day for a walk.</output></response>',
        ],
    ),
    (
        "And what is 3 times 7?",
        [
            # {{calls[0].product}} is the result of the first call of this same response
            '<response><action_call name="multiply">{"a": 3, "b": 7}</action_call>'
            '<output type="console:message">3 × 7 = {{calls[0].product}}</output></response>',
            # the result is still shown in a next step: the model has nothing to add
            "<response><reasoning>Already answered.</reasoning></response>",
        ],
    ),
]


def show_tools(event: RunEvent) -> None:
    """A run event listener: print each tool call and its result as they happen."""
    if event.type == RunEventType.TOOL_CALL:
        print(f"  [calls {event.content['name']} {event.content['arguments']}]")
    elif event.type == RunEventType.TOOL_CALL_RESULT:
        print(f"  [{event.content['name']} returned {event.content.get('result', event.content.get('error'))}]")


async def main() -> None:
    from _demo import console, console_extension  # the stand-in platform of the demos, beside this file

    model = ScriptedModel([answer for _, answers in CONVERSATION for answer in answers])
    agent = create_agent(model=model, bot=bot, extensions=[console_extension()])
    agent.add_event_listener(show_tools)
    async with agent:
        for text, _ in CONVERSATION:
            print(f"user: {text}")
            await agent.send(console, "ada", {"type": "console:message", "data": text})


if __name__ == "__main__":
    asyncio.run(main())
