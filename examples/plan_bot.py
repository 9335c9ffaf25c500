"""A plan with instances: the model writes a whole strategy in one response, and the engine runs it.

The response below holds a plan (Acts of Emergence 008): ``forecast`` runs as three instances in parallel (one per
city, ``_instances``), each writing into its own workspace, and their results are gathered at
``†state.trip.forecasts``; ``pack`` reads that path, so it waits for all three, although it is written first; the
reply waits for ``pack`` through ``{{calls[0].summary}}``. Run it with ``python examples/plan_bot.py``.

"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core import RunEvent, RunEventType, ScriptedModel, action, context, create_agent, output

SKIES = {"Paris": "sunny", "Rome": "rainy", "Oslo": "snowy"}
GEAR = {"sunny": "sunglasses", "rainy": "an umbrella", "snowy": "a scarf"}


class City(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    city: str
    output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")


class Trip(BaseModel):
    forecasts: list[dict[str, str]]


async def forecast(args: City, ctx: Any, agent: Any) -> dict[str, str]:
    await asyncio.sleep(0.01)  # a slow weather service: the three instances wait for it together
    return {"city": args.city, "sky": SKIES.get(args.city, "cloudy")}


def pack(args: Trip, ctx: Any, agent: Any) -> dict[str, str]:
    items = [f"{GEAR.get(f['sky'], 'a jacket')} for {f['city']}" for f in args.forecasts]
    return {"summary": ", ".join(items)}


chat = context(type="chat", schema=str, key=lambda user: user)
QUESTION = "I am going to Paris, Rome and Oslo. What should I pack?"
say = output(type="chat:message", handler=lambda text, ctx, agent: print(f"bot: {text}"))

PLAN = (
    "<response><reasoning>Forecast every city at once, then pack for all of them.</reasoning>"
    '<action_call name="pack">{"forecasts": "†state.trip.forecasts"}</action_call>'
    '<action_call name="forecast">{"_instances": [{"city": "Paris"}, {"city": "Rome"}, {"city": "Oslo"}], '
    '"_outputPath": "†state.trip.forecasts"}</action_call>'
    '<output type="chat:message">Pack {{calls[0].summary}}.</output>'
    "</response>"
)


def show_tools(event: RunEvent) -> None:
    if event.type == RunEventType.TOOL_CALL:
        print(f"  [calls {event.content['name']}]")
    elif event.type == RunEventType.TOOL_CALL_RESULT:
        print(f"  [{event.content['name']}: {event.content.get('result', event.content.get('error'))}]")


async def main() -> None:
    model = ScriptedModel([PLAN, "<response><reasoning>Done.</reasoning></response>"])
    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[
            action(name="forecast", description="The forecast of one city.", schema=City, handler=forecast),
            action(name="pack", description="What to pack for a trip.", schema=Trip, handler=pack),
        ],
        outputs=[say],
    )
    agent.add_event_listener(show_tools)
    async with agent:
        print(f"user: {QUESTION}")
        await agent.send(chat, "ada", {"type": "chat:message", "data": QUESTION})


if __name__ == "__main__":
    asyncio.run(main())
