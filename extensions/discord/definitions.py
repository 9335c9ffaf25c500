"""The Discord definitions: the ``discord:channel`` context, its input, output and actions.

Nothing here imports discord.py: the handlers reach the platform through the ``DiscordRuntime`` bound to
the agent by ``discord_extension`` (see ``runtime.py``), so these objects can be imported, and a context's
memory reset, without the ``discord`` extra.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from core.definitions import ActionContext as _ActionContext
from core.definitions import (
    ContextState,
    InputContext,
    OutputContext,
    PlatformChat,
    action,
    context,
    input,
    output,
)
from core.slots import Slot

from ..chat.exactly_once import may_post
from ..chat.heard import echoes_heard, heard_quote
from ..chat.i18n import localized
from ..chat.registry import RuntimeRegistry

if TYPE_CHECKING:
    from core import Host, Setup
    from core.definitions import Send
    from core.fleet.reply_ledger import ReplyLedger

__all__ = (
    "POLL",
    "POLL_ANSWER",
    "REPLY_TO",
    "ChannelArgs",
    "PollArgs",
    "ReactArgs",
    "Runtime",
    "bind_runtime",
    "discord_channel",
    "discord_message_input",
    "discord_message_output",
    "discord_poll_answer_input",
    "discord_poll_output",
    "discord_react",
    "get_runtime",
)

log = logging.getLogger("extensions.discord")

REPLY_TO: Slot[int] = Slot("discord:reply_to")
"""Kept in ``ContextState.values``: the id of the message the run answers (set by the input handler)."""


class Runtime(Protocol):
    """What the definitions need from the platform side (``DiscordRuntime`` implements it)."""

    async def post_reply(
        self, *, channel_id: int, text: str, reply_to: int | None, idempotency_key: str
    ) -> list[int]: ...

    async def deliver(
        self,
        *,
        key: tuple[str, int, int],
        channel_id: int,
        text: str,
        reply_to: int | None,
        idempotency_key: str,
        ledger: ReplyLedger | None = None,
    ) -> list[int]: ...

    def typing(self, channel_id: int) -> AbstractAsyncContextManager[None]: ...

    async def abandon_replies(self, context_id: str) -> None: ...

    async def add_reaction(self, *, channel_id: int, message_id: int, emoji: str) -> None: ...

    async def dm_channel(self, user_id: int) -> int: ...

    async def post_poll(
        self, *, args: ChannelArgs, poll: PollArgs, reply_to: int | None, idempotency_key: str
    ) -> list[int]: ...

    def subscribe(self, send: Send, agent: Setup) -> Any: ...

    async def wait_closed(self) -> None: ...

    @property
    def error_message(self) -> str: ...


_runtimes: RuntimeRegistry[Runtime] = RuntimeRegistry(platform="Discord", extension="discord_extension")


def bind_runtime(agent: Setup, runtime: Runtime) -> None:
    """Make ``runtime`` the Discord side of ``agent`` (the extension's install hook does this)."""
    _runtimes.bind(agent, runtime)


def get_runtime(agent: Host) -> Runtime:
    """The Discord side of ``agent``; a ``ConfigError`` when the agent was built without the extension."""
    return _runtimes.get(agent)


class ChannelArgs(pydantic.BaseModel):
    """Identifies one conversation: a server channel, a thread or a DM channel."""

    model_config = pydantic.ConfigDict(frozen=True)

    channel_id: int = pydantic.Field(description="The channel, thread or DM channel id")
    guild_id: int | None = pydantic.Field(default=None, description="The server id; None in a DM")
    parent_id: int | None = pydantic.Field(
        default=None, description="The channel of a thread, whose chat settings the thread starts from"
    )


POLL = "discord:poll"
"""The type of the output that posts a poll."""
POLL_ANSWER = "discord:poll_answer"
"""The type of the input a vote in one of the bot's polls becomes."""


class PollArgs(pydantic.BaseModel):
    """A poll to post in the channel (Discord's limits: a question of 300 characters, 10 answers of 55)."""

    question: str = pydantic.Field(min_length=1, max_length=300, description="The question (1-300 characters)")
    options: list[pydantic.constr(min_length=1, max_length=55)] = pydantic.Field(  # type: ignore[valid-type]
        min_length=1, max_length=10, description="The answers to choose from (1-10, each 1-55 characters)"
    )
    multiple: bool = pydantic.Field(default=False, description="Whether a person may choose several answers")
    hours: int = pydantic.Field(default=24, ge=1, le=768, description="How long the poll stays open, in hours")


class ReactArgs(pydantic.BaseModel):
    """Arguments of ``discord:react``."""

    emoji: str = pydantic.Field(description="A unicode emoji such as 👍, or a server emoji written <:name:id>")
    message_id: int | str | None = pydantic.Field(
        default=None, description="The message to react to (default: the message being answered)"
    )


def _key(args: ChannelArgs) -> str:
    return str(args.channel_id)


def _instructions(state: ContextState) -> str:
    where = "a direct message" if state.platform_args.guild_id is None else "a Discord server channel or thread"
    return (
        f"You are talking in {where}. Messages may come from several people; the author of each is in "
        "its attributes. Answer with a discord:message output; keep it short unless asked for detail."
    )


async def _on_error(exc: Exception, state: ContextState, agent: Host) -> None:
    """A failed run still gets a short answer, so the user is not left waiting; an answer it was writing is
    marked as cut. (Not by a queue worker that lost the conversation: the one that took it over answers.)"""
    runtime = _runtimes.find(agent)
    if runtime is None or not may_post(state):
        return
    try:
        await runtime.abandon_replies(state.id)
    except Exception as abandon_exc:
        log.warning("could not mark the cut answer in channel %s: %s", state.platform_args.channel_id, abandon_exc)
    reply_to = state.values.get(REPLY_TO)
    language = state.chat.language or agent.chat_policy.default_language
    try:
        await runtime.post_reply(
            channel_id=state.platform_args.channel_id,
            text=localized(runtime.error_message, "discord.error", language),
            reply_to=reply_to,
            idempotency_key=f"error:{reply_to or state.id}",
        )
    except Exception as post_exc:
        log.warning("could not tell channel %s that the run failed: %s", state.platform_args.channel_id, post_exc)


def _while_running(state: ContextState, agent: Host) -> AbstractAsyncContextManager[Any]:
    """Shows "typing..." in the channel for as long as a run answers it, wherever it runs (a queue worker too)."""
    runtime = _runtimes.find(agent)
    return runtime.typing(state.platform_args.channel_id) if runtime is not None else contextlib.nullcontext()


discord_channel = context(
    type="discord:channel",
    schema=ChannelArgs,
    key=_key,
    description="A Discord conversation: one server channel, one thread or one DM, each with its own memory",
    instructions=_instructions,
    while_running=_while_running,
    on_error=_on_error,
    settings_from=lambda args: (
        ChannelArgs(channel_id=args.parent_id, guild_id=args.guild_id) if args.parent_id is not None else None
    ),
    conversation=True,
    chat_of=lambda args: PlatformChat(
        platform="discord",
        chat_id=str(args.channel_id),
        thread_id=str(args.channel_id) if args.parent_id is not None else None,
        args=args,
    ),
    example_args=ChannelArgs(channel_id=1),  # (a direct message: no server)
)
"""The ``discord:channel`` context, keyed by channel id (a thread or a DM is its own channel; a thread starts
from its channel's chat settings)."""


async def _on_input(data: Any, ctx: InputContext, agent: Host) -> None:
    """Remember which message the run answers; with ``STT_ECHO=true``, quote what was heard in a voice
    message first (its nonce comes from the message id, so a retried batch does not quote twice)."""
    message_id = ctx.input_ref.params.get("message_id")
    if message_id:
        ctx.state.values.put(REPLY_TO, int(message_id))
    quote = heard_quote(ctx.input_ref) if echoes_heard(agent) else None
    runtime = _runtimes.find(agent)
    if quote is None or runtime is None or not may_post(ctx.state):
        return
    try:
        await runtime.post_reply(
            channel_id=ctx.state.platform_args.channel_id,
            text=quote,
            reply_to=int(message_id) if message_id else None,
            idempotency_key=f"heard:{message_id or ctx.input_ref.id}",
        )
    except Exception as exc:
        log.warning("could not quote the voice message in channel %s: %s", ctx.state.platform_args.channel_id, exc)


async def _subscribe(send: Send, agent: Setup) -> Any:
    return get_runtime(agent).subscribe(send, agent)


discord_message_input = input(
    type="discord:message",
    schema=str,
    handler=_on_input,
    subscribe=_subscribe,
    context=discord_channel,
)
"""A message someone wrote to the bot; params carry ``author``, ``author_id`` and ``message_id``."""


async def _post(data: str, ctx: OutputContext, agent: Host) -> None:
    """Post the answer as a reply to the message being answered; an answer shown while it was written gets
    its final text instead. In a queued run the reply follows the run's ledger: posted exactly once."""
    state = ctx.state
    await get_runtime(agent).deliver(
        key=(state.id, ctx.step, ctx.index),
        channel_id=state.platform_args.channel_id,
        text=data,
        reply_to=state.values.get(REPLY_TO),
        idempotency_key=ctx.output_ref.id,
        ledger=state.ledger,
    )


discord_message_output = output(
    type="discord:message",
    description="Post a message in this Discord conversation, as a reply to the message being answered",
    instructions=(
        "Discord markdown works (**bold**, *italic*, `code`, ```lang code blocks```). Long answers are split "
        "into several messages for you. Mentions never notify anyone."
    ),
    handler=_post,
    context=discord_channel,
    examples=('<output type="discord:message">Sure! Here is how it works: ...</output>',),
)
"""The ``discord:message`` output: the reply, split at 2,000 characters, never pinging anyone."""


async def _react(args: ReactArgs, ctx: _ActionContext, agent: Host) -> dict[str, Any]:
    state = ctx.state
    target = args.message_id or state.values.get(REPLY_TO)
    if target is None:
        raise ValueError("there is no message to react to here; pass message_id")
    await get_runtime(agent).add_reaction(
        channel_id=state.platform_args.channel_id, message_id=int(target), emoji=args.emoji.strip()
    )
    return {"reacted": args.emoji.strip(), "message_id": str(target)}


discord_react = action(
    name="discord:react",
    description="Add an emoji reaction to a message in this conversation",
    instructions="Use it to acknowledge a message without words, or alongside an answer.",
    schema=ReactArgs,
    handler=_react,
    context=discord_channel,
    timeout=30.0,
)
"""The ``discord:react`` action: react with an emoji to the message being answered (or another one)."""


async def _post_poll(data: PollArgs, ctx: OutputContext, agent: Host) -> None:
    """Post the poll in the conversation's channel (Discord's nonce keeps a retried batch from posting it twice);
    each vote comes back as a ``discord:poll_answer`` input."""
    state = ctx.state
    await get_runtime(agent).post_poll(
        args=state.platform_args,
        poll=data,
        reply_to=state.values.get(REPLY_TO),
        idempotency_key=ctx.output_ref.id,
    )


discord_poll_output = output(
    type=POLL,
    description=f"Post a poll in this Discord conversation; each vote comes back to you as a {POLL_ANSWER} input",
    instructions="The content is JSON: the question, 1 to 10 options, multiple (true when several may be chosen), "
    "and hours (how long it stays open, 24 unless asked).",
    schema=PollArgs,
    handler=_post_poll,
    context=discord_channel,
    examples=[f'<output type="{POLL}">{{"question": "Tea or coffee?", "options": ["Tea", "Coffee"]}}</output>'],
)

discord_poll_answer_input = input(
    type=POLL_ANSWER,
    schema=str,
    handler=_on_input,  # (the answer replies to the poll)
    context=discord_channel,
)
"""A vote in one of the bot's polls: params carry ``author``, ``author_id``, ``message_id`` (the poll's) and
``answer``."""
