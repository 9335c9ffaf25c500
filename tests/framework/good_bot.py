"""A correct bot file: ``mypy --strict`` must find nothing in it (test_typing.py), also from outside the
repository, as a bot author who installed the package sees it."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from core import ActionContext, ContextState, Host, OutputContext, ScriptedModel, action, context, create_agent, output


class Weather(BaseModel):
    city: str


class ChatArgs(BaseModel):
    chat_id: int


async def get_weather(args: Weather, ctx: ActionContext, agent: Host) -> dict[str, str]:
    return {"city": args.city, "sky": "sunny"}


def say(data: str, ctx: OutputContext, agent: Host) -> None:
    print(f"bot: {data}")


def render(state: ContextState) -> str:
    return f"chat {state.key}"


weather = action(name="weather", schema=Weather, handler=get_weather)
message = output(type="chat:message", handler=say)
chat = context(type="chat", schema=ChatArgs, key=lambda args: str(args.chat_id), render=render)


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
