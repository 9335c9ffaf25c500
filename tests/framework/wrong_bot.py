"""A bot file with ten mistakes a bot author makes; ``mypy --strict`` should report each (test_typing.py).

Each mistake is on the line marked ``# mistake: <name>``. The file is only type-checked, never run.
"""

from __future__ import annotations

from pydantic import BaseModel

from core import ActionContext, Agent, Bot, Host, OutputContext, action, context, output


class Weather(BaseModel):
    city: str


class Forecast(BaseModel):
    city: str
    days: int


class ChatArgs(BaseModel):
    chat_id: int


async def forecast(args: Forecast, ctx: ActionContext, agent: Host) -> str:
    return f"{args.days} days of sun in {args.city}"


def say(data: int, ctx: OutputContext, agent: Host) -> None:
    print(data + 1)


def count(data: str, ctx: OutputContext, agent: Host) -> int:
    return len(data)


async def relay(args: Weather, ctx: ActionContext, agent: Host) -> None:
    await agent.send(chat, args.city, {"type": "chat:message", "data": args.city})  # mistake: args-of-another-context


weather = action(name="weather", schema=Weather, handler=forecast)  # mistake: handler-for-another-schema
sky = action(name="sky", schema=Weather, handler=lambda args, ctx, agent: args.citty)  # mistake: misspelled-attribute
message = output(type="chat:message", schema=str, handler=say)  # mistake: int-for-string-content
counted = output(type="chat:count", handler=count)  # mistake: output-returns-an-int
chat = context(type="chat", schema=ChatArgs, key=lambda args: args.channel)  # mistake: key-reads-a-missing-field


async def main(agent: Agent) -> None:
    await agent.send(chat, "general", {"type": "chat:message", "data": "hi"})  # mistake: agent-send-wrong-args


bot = Bot(  # written inline, as the docs and bots new write it: each checked against its own schema
    actions=[action(name="inline", schema=Weather, handler=forecast)],  # mistake: inline-handler-for-another-schema
    outputs=[output(type="chat:inline", schema=str, handler=say)],  # mistake: inline-int-for-string-content
)
inline = context(
    type="inline",
    actions=[action(name="in_context", schema=Weather, handler=forecast)],  # mistake: inline-context-action
)
