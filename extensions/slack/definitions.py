"""The Slack definitions: the ``slack:conversation`` context (a DM, or a thread of a channel), its input and
output.

Nothing here imports slack-bolt: the handlers reach Slack through the ``SlackRuntime`` bound to the agent by
``slack_extension`` (``runtime.py``), so these objects can be imported, and a conversation's memory reset, without
the ``slack`` extra.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from core.definitions import ContextState, InputContext, OutputContext, PlatformChat, context, input, output
from core.slots import Slot

from ..chat.exactly_once import may_post
from ..chat.i18n import say
from ..chat.registry import RuntimeRegistry

if TYPE_CHECKING:
    from core import Host, Setup
    from core.definitions import Send
    from core.fleet.reply_ledger import ReplyLedger

__all__ = (
    "MESSAGE",
    "REPLY_TO",
    "ConversationArgs",
    "Runtime",
    "bind_runtime",
    "find_runtime",
    "get_runtime",
    "slack_conversation",
    "slack_message_input",
    "slack_message_output",
)

log = logging.getLogger("extensions.slack")

MESSAGE = "slack:message"
"""The type of the input a message becomes and of the output that answers it."""
REPLY_TO: Slot[str] = Slot("slack:reply_to")
"""Kept in ``ContextState.values``: the ``ts`` of the message the run answers (set by the input handler)."""


class Runtime(Protocol):
    """What the definitions need from the Slack side (``SlackRuntime`` implements it)."""

    async def deliver(
        self,
        *,
        key: tuple[str, int, int],
        args: ConversationArgs,
        text: str,
        idempotency_key: str,
        ledger: ReplyLedger | None = None,
    ) -> list[str]: ...

    async def post_notice(self, args: ConversationArgs, text: str) -> None: ...

    async def abandon_replies(self, context_id: str) -> None: ...

    def typing(self, args: ConversationArgs) -> AbstractAsyncContextManager[None]: ...

    def subscribe(self, send: Send, agent: Setup) -> Any: ...


_runtimes: RuntimeRegistry[Runtime] = RuntimeRegistry(platform="Slack", extension="slack_extension")


def bind_runtime(agent: Setup, runtime: Runtime) -> None:
    """Make ``runtime`` the Slack side of ``agent`` (the extension's install hook does this)."""
    _runtimes.bind(agent, runtime)


def get_runtime(agent: Host) -> Runtime:
    """The Slack side of ``agent``; a ``ConfigError`` when the agent was built without the extension."""
    return _runtimes.get(agent)


def find_runtime(agent: Host) -> Runtime | None:
    """The Slack side of ``agent``, or None."""
    return _runtimes.find(agent)


class ConversationArgs(pydantic.BaseModel):
    """Identifies one conversation: a direct message channel, or one thread of a channel."""

    model_config = pydantic.ConfigDict(frozen=True)

    channel: str = pydantic.Field(description="The channel id (C..., G..., or D... for a direct message)")
    thread_ts: str | None = pydantic.Field(
        default=None, description="The ts of the thread's first message, in a channel; None in a direct message"
    )


def _key(args: ConversationArgs) -> str:
    return f"{args.channel}:{args.thread_ts}" if args.thread_ts else args.channel


def _instructions(state: ContextState) -> str:
    where = "a Slack direct message" if state.platform_args.thread_ts is None else "a Slack thread of a channel"
    return (
        f"You are talking in {where}. Messages may come from several people; the author of each is in its "
        f"attributes. Answer with a {MESSAGE} output; keep it short unless asked for detail."
    )


async def _on_error(exc: Exception, state: ContextState, agent: Host) -> None:
    """A failed run still gets a short answer (not by a queue worker that lost the conversation)."""
    runtime = _runtimes.find(agent)
    if runtime is None or not may_post(state):
        return
    with contextlib.suppress(Exception):
        await runtime.abandon_replies(state.id)
    try:
        await runtime.post_notice(state.platform_args, say("run_failed", state.chat.language or None))
    except Exception as post_exc:
        log.warning("slack: could not tell %s that the run failed: %s", state.platform_args.channel, post_exc)


def _while_running(state: ContextState, agent: Host) -> AbstractAsyncContextManager[Any]:
    runtime = _runtimes.find(agent)
    return runtime.typing(state.platform_args) if runtime is not None else contextlib.nullcontext()


slack_conversation = context(
    type="slack:conversation",
    schema=ConversationArgs,
    key=_key,
    description="A Slack conversation: one direct message channel, or one thread of a channel, each with its "
    "own memory",
    instructions=_instructions,
    while_running=_while_running,
    on_error=_on_error,
    settings_from=lambda args: ConversationArgs(channel=args.channel) if args.thread_ts is not None else None,
    conversation=True,
    chat_of=lambda args: PlatformChat(platform="slack", chat_id=args.channel, thread_id=args.thread_ts, args=args),
    example_args=ConversationArgs(channel="D1"),
)
"""The ``slack:conversation`` context: a thread starts from its channel's chat settings."""


async def _on_input(data: Any, ctx: InputContext, agent: Host) -> None:
    message_id = ctx.input_ref.params.get("message_id")
    if message_id:
        ctx.state.values.put(REPLY_TO, message_id)


async def _subscribe(send: Send, agent: Setup) -> Any:
    return get_runtime(agent).subscribe(send, agent)


slack_message_input = input(
    type=MESSAGE,
    schema=str,
    handler=_on_input,
    subscribe=_subscribe,
    context=slack_conversation,
)
"""A message someone wrote to the bot; params carry ``author``, ``author_id`` and ``message_id`` (its ts)."""


async def _post(data: str, ctx: OutputContext, agent: Host) -> None:
    """Post the answer in the conversation (an answer shown while it was written gets its final text instead; in a
    queued run the reply follows the run's ledger: posted exactly once)."""
    state = ctx.state
    await get_runtime(agent).deliver(
        key=(state.id, ctx.step, ctx.index),
        args=state.platform_args,
        text=data,
        idempotency_key=ctx.output_ref.id,
        ledger=state.ledger,
    )


slack_message_output = output(
    type=MESSAGE,
    description="Post a message in this Slack conversation",
    instructions=(
        "Slack's mrkdwn works (*bold*, _italic_, `code`, ```code blocks```). Long answers are split into several "
        "messages for you. Mentions never notify anyone."
    ),
    handler=_post,
    context=slack_conversation,
    examples=(f'<output type="{MESSAGE}">Sure! Here is how it works: ...</output>',),
)
"""The ``slack:message`` output: the reply, split at 3,500 characters."""
