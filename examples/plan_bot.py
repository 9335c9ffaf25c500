"""A plan with instances: the model writes a whole strategy in one response, and the engine runs it.

The response below holds a plan (Acts of Emergence 008): ``forecast`` runs as three instances in parallel (one per
city, ``_instances``), each writing into its own workspace, and their results are gathered at
``†state.trip.forecasts`` (a flexible ``_outputPath``: the model chooses it, the schema's pattern ``^†`` allows any);
``pack`` reads that path, so it waits for all three, although it is written first; the checklist waits for ``pack``
through ``{{calls[0].summary}}``. The forecasts stay in the chat's state, in front of the model in the next turns.
The bot's output ``trip:checklist`` posts the list with ``agent.say`` on whatever platform the chat is.

Run it as a bot (``bots run examples/plan_bot.py``), or as a scripted demo: ``python examples/plan_bot.py``.
"""

from __future__ import annotations

import asyncio

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
)

SKIES = {"Paris": "sunny", "Rome": "rainy", "Oslo": "snowy"}
GEAR = {"sunny": "sunglasses", "rainy": "an umbrella", "snowy": "a scarf"}


class City(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    city: str
    output_path: str | None = Field(default=None, alias="_outputPath", pattern="^†")


class Trip(BaseModel):
    forecasts: list[dict[str, str]]


async def forecast(args: City, ctx: ActionContext, agent: Host) -> dict[str, str]:
    await asyncio.sleep(0.01)  # a slow weather service: the three instances wait for it together
    return {"city": args.city, "sky": SKIES.get(args.city, "cloudy")}


def pack(args: Trip, ctx: ActionContext, agent: Host) -> dict[str, str]:
    items = [f"{GEAR.get(f['sky'], 'a jacket')} for {f['city']}" for f in args.forecasts]
    return {"summary": ", ".join(items)}


async def checklist(text: str, ctx: OutputContext, agent: Host) -> None:
    """A comma-separated list, posted as a checklist on the chat's platform."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    await agent.say(ctx.state, "Packing list:\n" + "\n".join(f"[ ] {item}" for item in items))


bot = Bot(
    name="trip",
    instructions=(
        "Forecast every city of a trip at once (forecast with _instances, saved at †state.trip.forecasts), "
        "then pack for all of them and show the result as a trip:checklist."
    ),
    actions=[
        action(name="forecast", description="The forecast of one city.", schema=City, handler=forecast),
        action(name="pack", description="What to pack for a trip.", schema=Trip, handler=pack),
    ],
    outputs=[
        output(
            type="trip:checklist",
            description="Shows a comma-separated list of things to pack as a checklist.",
            handler=checklist,
            examples=['<output type="trip:checklist">sunglasses, a hat</output>'],
        )
    ],
)
"""What ``bots run examples/plan_bot.py`` runs."""

QUESTION = "I am going to Paris, Rome and Oslo. What should I pack?"
PLAN = (
    "<response><reasoning>Forecast every city at once, then pack for all of them.</reasoning>"
    '<action_call name="pack">{"forecasts": "†state.trip.forecasts"}</action_call>'
    '<action_call name="forecast">{"_instances": [{"city": "Paris"}, {"city": "Rome"}, {"city": "Oslo"}], '
    '"_outputPath": "†state.trip.forecasts"}</action_call>'
    '<output type="trip:checklist">{{calls[0].summary}}</output>'
    "</response>"
)


def show_tools(event: RunEvent) -> None:
    if event.type == RunEventType.TOOL_CALL:
        print(f"  [calls {event.content['name']}]")
    elif event.type == RunEventType.TOOL_CALL_RESULT:
        print(f"  [{event.content['name']}: {event.content.get('result', event.content.get('error'))}]")


async def main() -> None:
    from _demo import console, console_extension  # the stand-in platform of the demos, beside this file

    model = ScriptedModel([PLAN, "<response><reasoning>Done.</reasoning></response>"])
    agent = create_agent(model=model, bot=bot, extensions=[console_extension()])
    agent.add_event_listener(show_tools)
    async with agent:
        print(f"user: {QUESTION}")
        await agent.send(console, "ada", {"type": "console:message", "data": QUESTION})


if __name__ == "__main__":
    asyncio.run(main())
