"""A correct bot file: ``mypy --strict`` must find nothing in it (test_typing.py), also from outside the
repository, as a bot author who installed the package sees it."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from core import (
    ActionContext,
    ContextState,
    Host,
    OutputContext,
    OutputRefResponse,
    ScriptedModel,
    action,
    context,
    create_agent,
    output,
)


class Weather(BaseModel):
    city: str


class ChatArgs(BaseModel):
    chat_id: int


async def get_weather(args: Weather, ctx: ActionContext, agent: Host) -> dict[str, str]:
    return {"city": args.city, "sky": "sunny"}


def say(data: str, ctx: OutputContext, agent: Host) -> None:
    print(f"bot: {data}")


async def note(data: str, ctx: OutputContext, agent: Host) -> OutputRefResponse:
    return OutputRefResponse(data={"noted": data})


def again(data: str, ctx: OutputContext, agent: Host) -> dict[str, bool]:
    return {"processed": False}


async def relay(args: Weather, ctx: ActionContext, agent: Host) -> None:
    said = {"type": "chat:message", "data": f"Weather asked for {args.city}"}
    await agent.send(chat, {"chat_id": 1}, said)
    await agent.send(chat, ChatArgs(chat_id=2), said)
    await agent.send(room, "general", said)


def render(state: ContextState) -> str:
    return f"chat {state.key}"


weather = action(name="weather", schema=Weather, handler=get_weather)
message = output(type="chat:message", handler=say)
noted = output(type="chat:note", handler=note)
asked = output(type="chat:ask", handler=again)
told = action(name="relay", schema=Weather, handler=relay)
chat = context(type="chat", schema=ChatArgs, key=lambda args: str(args.chat_id), render=render)
room = context(type="room", schema=str, key=lambda name: name)


async def main() -> None:
    model = ScriptedModel(
        [
            '<response><action_call name="weather">{"city": "Paris"}</action_call></response>',
            '<response><output type="chat:message">Sunny in Paris.</output></response>',
        ]
    )
    agent = create_agent(model=model, contexts=[chat], actions=[weather], outputs=[message])
    async with agent:
        await agent.send(chat, {"chat_id": 1}, {"type": "chat:message", "data": "Weather in Paris?"})


if __name__ == "__main__":
    asyncio.run(main())
