"""A correct bot file leaning on the types: a handler annotating the agent as ``Agent`` (the helpers accept any
type of ``Host``), typed attributes and context arguments, a list of different actions. ``mypy --strict`` finds
nothing in it (test_typing.py)."""

from __future__ import annotations

from pydantic import BaseModel

from core import Action, ActionContext, Agent, ContextState, Host, OutputContext, action, context, output


class Note(BaseModel):
    text: str


class Channel(BaseModel):
    channel_id: str


def keep(args: Note, ctx: ActionContext, agent: Agent) -> str:
    return args.text


def shout(data: str, ctx: OutputContext[Channel], agent: Host) -> None:
    print(ctx.attributes.channel_id, data.upper())


def started(state: ContextState[Channel], agent: Agent) -> None:
    print(state.args.channel_id)


notes = action(name="keep", schema=Note, handler=keep, install=lambda agent: agent.model)
either = action(name="any", handler=lambda args, ctx, agent: args.get("x"))
tools: list[Action] = [notes, either]
mixed = [notes, either]
loud = output(type="loud", attributes=Channel, handler=shout)
room = context(type="room", schema=Channel, key=lambda a: a.channel_id, on_run=started, actions=mixed)
