"""A bot whose context has its own schema (``Chat``: the chat id as text, the platform, a thread), reading
``state.args`` in its render as its author declared them: run by tests/apps/test_own_args.py unchanged with a
scripted model, in the terminal, on the web chat, Telegram and Discord, and in a fleet."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core import ActionContext, Bot, ContextState, Host, action, context


class Chat(BaseModel):
    """The bot's own arguments: on a platform, built from its chat (``PlatformChat``) by name."""

    chat_id: str
    platform: str = "test"
    thread_id: str | None = None


class Note(BaseModel):
    text: str = Field(description="What to note")


def show(state: ContextState[Chat]) -> str:
    """The chat as the model sees it; ``startswith`` fails on a platform's int chat id."""
    kind = "a group" if state.args.chat_id.startswith("-") else "a private chat"
    where = "a thread of " if state.args.thread_id is not None else ""
    notes = ", ".join(state.memory["notes"]) or "(none)"
    return f"This is {where}{kind} on {state.args.platform}; notes: {notes}"


def note(args: Note, ctx: ActionContext, agent: Host) -> str:
    ctx.memory["notes"].append(args.text)
    return "noted"


chats = context(
    type="noted",
    schema=Chat,
    key=lambda chat: chat.chat_id,
    create=lambda state: {"notes": []},
    render=show,
)

bot = Bot(
    name="noted",
    context=chats,
    instructions="Note what the user asks you to note.",
    actions=[action(name="note", description="Note something", schema=Note, handler=note)],
)
