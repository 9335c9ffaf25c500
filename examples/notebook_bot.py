"""A bot with its own context, a result saved to the state and its own output: a notebook per chat, and cards.

The bot's context (``notebook``) gives each chat an instance, created on first use (``create``) and shown to the
model by ``render``. ``remember`` saves each note to the chat's state with a fixed ``_outputPath``
(``†state.notes``, pushed), so the model sees every note in the next turns; the output ``notebook:card`` has an
attribute (the card's title) and a handler that draws the card and posts it with ``agent.say``, on whatever
platform the chat is.

Run it as a bot (``bots run examples/notebook_bot.py``: the terminal, or Telegram and Discord with their tokens set),
or as a scripted demo: ``python examples/notebook_bot.py`` plays the conversation below with a scripted model and
prints it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, Field

from core import (
    ActionContext,
    Bot,
    ContextState,
    Host,
    OutputContext,
    ScriptedModel,
    action,
    context,
    create_agent,
    escape_text,
    output,
    read_state,
)


class Note(BaseModel):
    text: str = Field(description="What to remember, as the user said it")
    _outputPath: str = "†state.notes"  # fixed: every note is saved there, never elsewhere
    _outputMethod: Literal["push"] = "push"  # added to the list


class CardAttributes(BaseModel):
    """The attributes the model writes on the tag: ``<output type="notebook:card" title="...">``."""

    title: str


def notes_of(state: ContextState[Any]) -> list[str]:
    """The notes saved so far in the chat's state."""
    notes: list[str] = read_state(state, "†state.notes", [])
    return notes


def render(state: ContextState[Any]) -> str:
    """How the notebook is shown to the model in <contexts>; text people wrote is escaped."""
    notes = notes_of(state)
    shown = "\n".join(f"- {escape_text(n)}" for n in notes) if notes else "(none yet)"
    return f"Notes:\n{shown}\nCards shown: {state.memory['cards']}"


def remember(args: Note, ctx: ActionContext, agent: Host) -> str:
    """What it returns is saved at ``†state.notes`` (the schema's ``_outputPath``)."""
    return args.text


async def show_card(text: str, ctx: OutputContext, agent: Host) -> dict[str, Any]:
    """An output handler gets the validated content, and in ``ctx`` the validated attributes and the chat's state.
    It posts the card through the chat's own platform; what it returns updates the log entry."""
    notes = notes_of(ctx.state)
    ctx.memory["cards"] += 1
    card = "\n".join([f"[{ctx.attributes.title}]", text, *(f"  * {note}" for note in notes)])
    await agent.say(ctx.state, card)
    return {"data": {"title": ctx.attributes.title, "notes": len(notes)}}


remember_note = action(name="remember", description="Write a note in the notebook.", schema=Note, handler=remember)
card = output(
    type="notebook:card",
    description="Shows the user a card with their notes under a title.",
    attributes=CardAttributes,
    handler=show_card,
    format=lambda ref: f"(showed the card {ref.params['title']!r} with {ref.data['notes']} notes)",
    examples=['<output type="notebook:card" title="Your notes">Here they are.</output>'],
)
notebook = context(
    type="notebook",
    schema=str,
    key=lambda chat: chat,
    create=lambda state: {"cards": 0},
    render=render,
    description="The notebook of this chat.",
)

bot = Bot(
    name="notebook",
    context=notebook,
    instructions="Write down what the user asks you to remember with remember; show the notes as a card when asked.",
    actions=[remember_note],
    outputs=[card],
)
"""What ``bots run examples/notebook_bot.py`` runs."""


def note_then_reply(text: str) -> list[str]:
    return [
        f'<response><action_call name="remember">{{"text": "{text}"}}</action_call>'
        '<output type="console:message">Noted.</output></response>',
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
    from _demo import console, console_extension  # the stand-in platform of the demos, beside this file

    model = ScriptedModel([answer for _, answers in CONVERSATION for answer in answers])
    agent = create_agent(model=model, bot=bot, extensions=[console_extension()])
    async with agent:
        for text, _ in CONVERSATION:
            print(f"user: {text}")
            await agent.send(console, "ada", {"type": "console:message", "data": text})


if __name__ == "__main__":
    asyncio.run(main())
