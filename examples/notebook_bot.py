"""A bot with its own context and its own output: a notebook per user, and cards it shows.

The context (``notebook``) gives each user an instance with its own memory, created on first use and shown to the
model by ``render``; its action writes to that memory; its output ``notebook:card`` has an attribute (the card's
title) and a handler that draws the card from the memory. Run it with ``python examples/notebook_bot.py``: it talks
to a scripted model (the answers below) and prints the conversation.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from core import ContextState, OutputContext, ScriptedModel, action, context, create_agent, escape_text, output


class Owner(BaseModel):
    """What names a notebook: its user."""

    user: str


class Note(BaseModel):
    text: str


class CardAttributes(BaseModel):
    """The attributes the model writes on the tag: ``<output type="notebook:card" title="...">``."""

    title: str


def new_notebook(state: ContextState) -> dict[str, Any]:
    """The memory of a notebook seen for the first time (then kept in the memory store)."""
    return {"notes": []}


def render(state: ContextState) -> str:
    """How the notebook is shown to the model in <contexts>; text people wrote is escaped."""
    notes = state.memory["notes"]
    return "Notes:\n" + ("\n".join(f"- {escape_text(n)}" for n in notes) if notes else "(none yet)")


def add_note(args: Note, ctx: Any, agent: Any) -> dict[str, int]:
    ctx.memory["notes"].append(args.text)
    return {"notes": len(ctx.memory["notes"])}


def show_card(text: str, ctx: OutputContext, agent: Any) -> dict[str, Any]:
    """An output handler gets the validated content, and in ``ctx`` the validated attributes, the tag's raw
    attributes (``ctx.output_ref.params``) and the context's memory. What it returns updates the log entry."""
    lines = [f"[{ctx.attributes.title}]", text, *(f"  * {note}" for note in ctx.memory["notes"])]
    width = max(len(line) for line in lines)
    print("bot: +" + "-" * (width + 2) + "+")
    for line in lines:
        print(f"     | {line.ljust(width)} |")
    print("     +" + "-" * (width + 2) + "+")
    return {"data": {"title": ctx.attributes.title, "notes": len(ctx.memory["notes"])}}


remember = action(name="remember", description="Write a note in the user's notebook.", schema=Note, handler=add_note)
card = output(
    type="notebook:card",
    description="Shows the user a card with their notes under a title.",
    attributes=CardAttributes,
    handler=show_card,
    format=lambda ref: f"(showed the card {ref.params['title']!r} with {ref.data['notes']} notes)",
    examples=['<output type="notebook:card" title="Your notes">Here they are.</output>'],
)
reply = output(
    type="notebook:reply", description="A short reply.", handler=lambda text, ctx, agent: print(f"bot: {text}")
)
notebook = context(
    type="notebook",
    schema=Owner,
    key=lambda owner: owner.user,
    create=new_notebook,
    render=render,
    instructions="Write down what the user asks you to remember; show the notes as a card when asked.",
    actions=[remember],
    outputs=[card, reply],
)


def note_then_reply(text: str) -> list[str]:
    return [
        f'<response><action_call name="remember">{{"text": "{text}"}}</action_call>'
        '<output type="notebook:reply">Noted.</output></response>',
        "<response><reasoning>The note is saved.</reasoning></response>",
    ]


CONVERSATION = [
    ("Remember: buy oat milk", note_then_reply("buy oat milk")),
    ("Remember: call Grace on Friday", note_then_reply("call Grace on Friday")),
    (
        "What is in my notebook?",
        ['<response><output type="notebook:card" title="Your notes">You asked me to remember:</output></response>'],
    ),
]


async def main() -> None:
    model = ScriptedModel([answer for _, answers in CONVERSATION for answer in answers])
    agent = create_agent(model=model, contexts=[notebook])
    async with agent:
        for text, _ in CONVERSATION:
            print(f"user: {text}")
            await agent.send(notebook, {"user": "ada"}, {"type": "notebook:message", "data": text})


if __name__ == "__main__":
    asyncio.run(main())
