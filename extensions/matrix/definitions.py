"""The Matrix definitions: the ``matrix:room`` context (a room, or one thread of it), the ``matrix:message`` input
and output.

Nothing here imports matrix-nio: handlers reach Matrix through the ``MatrixRuntime`` bound to the agent by
``matrix_extension`` (``runtime.py``), so these objects can be imported without the ``matrix`` extra.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from core.definitions import ContextState, InputContext, OutputContext, PlatformChat, context, input, output
from core.errors import ModelError
from core.media import Attachment
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
    "RoomArgs",
    "Runtime",
    "bind_runtime",
    "find_runtime",
    "get_runtime",
    "matrix_message_input",
    "matrix_message_output",
    "matrix_room",
)

log = logging.getLogger("extensions.matrix")

MESSAGE = "matrix:message"
"""The type of the input (a person's message) and of the output (the bot's reply)."""
REPLY_TO: Slot[str] = Slot("matrix:reply_to")
"""Kept in ``ContextState.values``: the event id of the message the run answers (set by the input handler)."""


class RoomArgs(pydantic.BaseModel):
    """Identifies one conversation: a room, or one thread of it."""

    model_config = pydantic.ConfigDict(frozen=True)

    room_id: str = pydantic.Field(description="The room id: !opaque:example.org")
    thread_id: str | None = pydantic.Field(
        default=None, description="The event id of the thread's root ($event), None outside threads"
    )


class Runtime(Protocol):
    """What the definitions need from the Matrix side (``MatrixRuntime`` implements it)."""

    async def subscribe(self, send: Send, agent: Setup) -> Any: ...

    async def deliver(
        self, *, key: tuple[str, int, int], args: RoomArgs, text: str, reply_to: str | None, ledger: ReplyLedger | None
    ) -> list[str]: ...

    async def notify(self, args: RoomArgs, text: str, *, reply_to: str | None) -> None: ...

    def typing(self, args: RoomArgs) -> AbstractAsyncContextManager[None]: ...

    async def abandon_replies(self, context_id: str) -> None: ...


_runtimes: RuntimeRegistry[Runtime] = RuntimeRegistry(platform="Matrix", extension="matrix_extension")


def bind_runtime(agent: Setup, runtime: Runtime) -> None:
    """Make ``runtime`` the Matrix side of ``agent`` (the extension's install hook does this)."""
    _runtimes.bind(agent, runtime)


def get_runtime(agent: Host) -> Runtime:
    """The Matrix side of ``agent``; a ``ConfigError`` when the agent was built without the extension."""
    return _runtimes.get(agent)


def find_runtime(agent: Host) -> Runtime | None:
    """The Matrix side of ``agent``, or None."""
    return _runtimes.find(agent)


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What the bot needs to know of one person's message."""

    args: RoomArgs
    """Its conversation: the room, and the thread it is in."""
    event_id: str
    sender: str
    """The author's user id: ``@ann:example.org``."""
    name: str
    """The author's display name in the room."""
    text: str
    private: bool
    """The room has two members at most: the bot and this person."""
    mentioned: bool
    """The bot is mentioned (``m.mentions``, its user id or its display name in the text)."""
    replied_to_bot: bool
    """It answers one of the bot's messages."""
    replied_id: str | None
    """The event it answers, if any."""
    admin: bool
    """Its author's power level makes them a moderator of the room."""
    attachments: list[Attachment] = field(default_factory=list)


def _key(args: RoomArgs) -> str:
    return args.room_id if args.thread_id is None else f"{args.room_id}:{args.thread_id}"


def _instructions(state: ContextState) -> str:
    where = "a thread of a Matrix room" if state.platform_args.thread_id else "a Matrix room"
    return (
        f"You are talking in {where}. Each message's author is in its attributes. Answer with one {MESSAGE} "
        "output, in plain text or Markdown. Keep answers short unless asked for detail."
    )


async def _tell(state: ContextState, agent: Host, key: str) -> None:
    """Post the short notice ``key`` to the room of ``state``, in its language (best effort)."""
    runtime = _runtimes.find(agent)
    if runtime is None or not may_post(state):
        return
    text = say(key, state.chat.language or agent.chat_policy.default_language)
    try:
        await runtime.notify(state.platform_args, text, reply_to=state.values.get(REPLY_TO))
    except Exception as exc:
        log.warning("could not tell room %s that no answer is coming: %s", state.platform_args.room_id, exc)


async def _on_error(exc: Exception, state: ContextState, agent: Host) -> None:
    """A failed run still gets a short answer; an answer it was writing is marked as cut."""
    runtime = _runtimes.find(agent)
    if runtime is not None:
        try:
            await runtime.abandon_replies(state.id)
        except Exception as abandon_exc:
            log.warning("could not mark a cut answer in %s: %s", state.id, abandon_exc)
    await _tell(state, agent, "model_down" if isinstance(exc, ModelError) else "run_failed")


async def _on_input(data: Any, ctx: InputContext, agent: Host) -> None:
    """Remember which event the run answers, so the reply quotes it."""
    event_id = ctx.input_ref.params.get("message_id", "")
    if event_id.startswith("$"):
        ctx.state.values.put(REPLY_TO, event_id)


async def _subscribe(send: Send, agent: Setup) -> Any:
    return await get_runtime(agent).subscribe(send, agent)


async def _post(text: str, ctx: OutputContext, agent: Host) -> None:
    """Post the reply in the room (in its thread), quoting the message answered; an answer shown while it was
    written gets its final text instead. In a queued run the reply follows the run's ledger: posted exactly once."""
    await get_runtime(agent).deliver(
        key=(ctx.state.id, ctx.step, ctx.index),
        args=ctx.state.platform_args,
        text=text,
        reply_to=ctx.state.values.get(REPLY_TO),
        ledger=ctx.state.ledger,
    )


def _while_running(state: ContextState, agent: Host) -> AbstractAsyncContextManager[Any]:
    """Shows "typing..." in the room for as long as a run answers it, wherever it runs."""
    runtime = _runtimes.find(agent)
    return runtime.typing(state.platform_args) if runtime is not None else contextlib.nullcontext()


matrix_room = context(
    type="matrix:room",
    schema=RoomArgs,
    key=_key,
    description="A Matrix conversation: one room, or one thread of a room",
    instructions=_instructions,
    while_running=_while_running,
    on_error=_on_error,
    settings_from=lambda args: RoomArgs(room_id=args.room_id) if args.thread_id is not None else None,
    conversation=True,
    chat_of=lambda args: PlatformChat(
        platform="matrix",
        chat_id=args.room_id,
        user_id=None,
        thread_id=args.thread_id,
        args=args,
    ),
    example_args=RoomArgs(room_id="!room:example.org"),
)
"""The ``matrix:room`` context, keyed by room (and thread: a thread starts from its room's settings)."""

matrix_message_input = input(type=MESSAGE, schema=str, handler=_on_input, subscribe=_subscribe, context=matrix_room)
"""A person's message in a room."""

matrix_message_output = output(
    type=MESSAGE,
    description="Send a message to the Matrix room you are talking in",
    instructions="Write the reply in plain text or Markdown; long replies are split into several messages for you.",
    schema=str,
    handler=_post,
    context=matrix_room,
    examples=[f'<output type="{MESSAGE}">Hello Ann! Here is what I found.</output>'],
)
"""The bot's reply."""
