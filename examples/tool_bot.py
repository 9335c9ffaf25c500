"""A tool-using bot: the model calls actions and answers with what they return.

Run it with ``python examples/tool_bot.py``: it talks to a scripted model (``ScriptedModel``, the answers below),
so it needs no key and no network, and prints the conversation with each tool call. To talk to a real model,
give ``create_agent`` another ``model=`` (``core.models.OpenAICompatModel``, ``AnthropicModel``, ``LocalModel``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from core import RunEvent, RunEventType, ScriptedModel, action, context, create_agent, output


class City(BaseModel):
    city: str


class Numbers(BaseModel):
    a: int
    b: int


def get_weather(args: City, ctx: Any, agent: Any) -> dict[str, Any]:
    """The action's handler: its return value is the result the model reads in its next step."""
    return {"city": args.city, "sky": "sunny", "celsius": 21}


def multiply(args: Numbers, ctx: Any, agent: Any) -> dict[str, int]:
    return {"product": args.a * args.b}


weather = action(name="weather", description="The current weather in a city.", schema=City, handler=get_weather)
calculator = action(name="multiply", description="Multiply two numbers.", schema=Numbers, handler=multiply)
say = output(
    type="chat:message", description="A reply to the user.", handler=lambda text, ctx, agent: print(f"bot: {text}")
)
chat = context(type="chat", schema=str, key=lambda user: user, description="A conversation with one user.")

CONVERSATION = [
    # What the user says, and what the (scripted) model answers at each step of the run that message starts.
    (
        "What's the weather in Paris?",
        [
            "<response><reasoning>I need the weather first.</reasoning>"
            '<action_call name="weather">{"city": "Paris"}</action_call></response>',
            # the next step shows the model the action's result in <updates>
            '<response><output type="chat:message">It is sunny and 21 °C in Paris.</output></response>',
        ],
    ),
    (
        "And what is 3 times 7?",
        [
            # {{calls[0].product}} is the result of the first call of this same response
            '<response><action_call name="multiply">{"a": 3, "b": 7}</action_call>'
            '<output type="chat:message">3 × 7 = {{calls[0].product}}</output></response>',
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
    model = ScriptedModel([answer for _, answers in CONVERSATION for answer in answers])
    agent = create_agent(model=model, contexts=[chat], actions=[weather, calculator], outputs=[say])
    agent.add_event_listener(show_tools)
    async with agent:
        for text, _ in CONVERSATION:
            print(f"user: {text}")
            await agent.send(chat, "ada", {"type": "chat:message", "data": text})


if __name__ == "__main__":
    asyncio.run(main())
