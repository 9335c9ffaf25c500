"""Telegram's guest mode (Bot API 10.0), off unless ``TELEGRAM_GUEST_MODE=true``: a person mentions the bot in a
chat it is not part of, Telegram sends it a ``guest_message`` update, and the bot answers once with
``answerGuestQuery``; Telegram posts the answer where the person asked.

It is a security decision as much as a feature. The conversation is the guest request alone: its own context
(``telegram:guest``, one per query), whose model sees the request's text and nothing else of the chat (not the
message it replies to, not a quote, not the chat's title), with ``working_memory="run"`` and no saved memory,
erased with its history at the end of its run (``on_run``: the run then saves nothing back). The person who
summoned the bot is its author, with the tier ``summoned`` (``core.trust``), and the usage and the limits count
against them. Nothing here imports python-telegram-bot (``guest_answer.py`` does the PTB side).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from core.definitions import ContextState, OutputContext, context, input, output

from .definitions import get_runtime

if TYPE_CHECKING:
    from core import Host

__all__ = (
    "GUEST_ANSWER",
    "GUEST_MESSAGE",
    "GuestArgs",
    "GuestRuntime",
    "telegram_guest",
    "telegram_guest_answer_output",
    "telegram_guest_message_input",
)

log = logging.getLogger("extensions.telegram")

GUEST_MESSAGE = "telegram:guest_message"
"""The type of the input a guest request becomes."""
GUEST_ANSWER = "telegram:guest_answer"
"""The type of the output that answers it."""


class GuestRuntime(Protocol):
    """What the guest definitions need from the platform side (``TelegramRuntime`` implements it)."""

    async def answer_guest(self, *, query_id: str, text: str) -> None: ...

    async def expire_keys(self, context_id: str) -> None: ...


class GuestArgs(pydantic.BaseModel):
    """One guest request: its query (the conversation is this request alone) and the chat it came from."""

    model_config = pydantic.ConfigDict(frozen=True)

    query_id: str = pydantic.Field(description="Telegram's guest_query_id (answered once, with answerGuestQuery)")
    chat_id: int = pydantic.Field(description="The chat the bot was summoned into (not the bot's)")


def _instructions(state: ContextState) -> str:
    return (
        "You were summoned as a guest into a Telegram chat you are not part of. You see only the request written "
        f"to you, nothing else of that chat, and you will remember nothing of it. Answer with one {GUEST_ANSWER} "
        "output, in Markdown, short (one message)."
    )


async def _nothing_kept(state: ContextState, agent: Host) -> None:
    """A guest conversation's memory is never saved (its working memory and history are erased once answered)."""


async def _forget(state: ContextState, agent: Host) -> None:
    """Once the request is answered, erase its conversation (``Host.forget``, from inside the run: the run saves
    nothing back and adds nothing to the history); in a fleet, what the queue keeps of it (its dedupe key, no text)
    expires."""
    await agent.forget(telegram_guest, state.platform_args)
    runtime: Any = get_runtime(agent)
    await runtime.expire_keys(state.id)


async def _answer(text: str, ctx: OutputContext, agent: Host) -> None:
    args: GuestArgs = ctx.state.platform_args
    runtime: Any = get_runtime(agent)
    await runtime.answer_guest(query_id=args.query_id, text=text)


telegram_guest = context(
    type="telegram:guest",
    schema=GuestArgs,
    key=lambda args: args.query_id,
    description="One guest request in a Telegram chat the bot is not part of: the request alone",
    instructions=_instructions,
    working_memory="run",
    save=_nothing_kept,
    on_run=_forget,
    max_steps=3,
    example_args=GuestArgs(query_id="1", chat_id=-1),
)
"""The ``telegram:guest`` context: one per guest request, remembered by nothing."""

telegram_guest_message_input = input(type=GUEST_MESSAGE, schema=str, context=telegram_guest)
"""A guest request: its text only; params carry the summoner (``user``, ``user_id``, the ``summoned`` tier)."""

telegram_guest_answer_output = output(
    type=GUEST_ANSWER,
    description="Answer the guest request (Telegram posts it in the chat where you were summoned)",
    instructions="One message in Markdown; it is posted once and cannot be edited.",
    schema=str,
    handler=_answer,
    context=telegram_guest,
    examples=[f'<output type="{GUEST_ANSWER}">The capital of France is **Paris**.</output>'],
)
