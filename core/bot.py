"""A bot as a value: its conversation context, actions, outputs, instructions and plugins (``Bot``), and how its
context is laid over each platform's chat (``layer``).

A platform (Telegram, Discord, the web chat, the terminal) brings a context per conversation, keyed by its
channel, marked ``conversation=True``. A bot brings its own context: what it remembers of a conversation
(``create``), how it shows it to the model (``render``), its instructions, actions and outputs. When an agent
holds both, every platform conversation is an instance of the two laid together: the platform keeps the key
and its reply output; the bot gives the memory, the render, its instructions, actions and outputs. The bot's
``state.args`` are its own, of its schema, built from the platform's chat (``own_args``: the context's
``from_platform``, or its fields named after what every platform's chat has, ``PlatformChat``); the platform's
code reads ``state.platform_args``. So the same bot file runs on every platform, in one process or in a fleet,
unchanged.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .definition_types import AnyAction, AnyOutput
from .definitions import Action, Context, ContextState, Extension, Input, Output, PlatformChat, Service, maybe_await
from .errors import DefinitionError, ValidationError
from .safety import check_without

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from .definition_types import Host
    from .plugin import Plugin

__all__ = ("Bot", "layer", "own_args", "platform_chat")


@dataclass(kw_only=True, eq=False)
class Bot:
    """Everything that makes one bot, handed to ``create_agent(bot=...)`` or loaded by ``bots run APP``."""

    name: str = "bot"
    """The bot's name: logs, the fleet's check that a gateway and its workers run the same bot (empty: not
    checked)."""
    context: Context[Any] | None = None
    """The bot's conversation: on every platform each chat is an instance of it laid over the platform's
    context (``layer``); None: the platforms' own contexts as they are."""
    persona: str = ""
    """Who the bot is, in the system prompt; a conversation's ``/persona`` replaces it."""
    instructions: str = ""
    """What the bot must always do, in the system prompt after the protocol's instructions."""
    actions: Sequence[AnyAction] = ()
    """Actions offered in every conversation (each an ``action(...)``; ``AnyAction`` so that one written inline
    here is type-checked against its own schema)."""
    outputs: Sequence[AnyOutput] = ()
    """Outputs offered in every conversation (beside each platform's reply; each an ``output(...)``)."""
    inputs: Sequence[Input[Any]] = ()
    """Inputs of the bot's own (a webhook, a feed)."""
    contexts: Sequence[Context[Any]] = ()
    """Further contexts the bot uses (beside ``context``)."""
    extensions: Sequence[Extension] = ()
    """Extensions the bot brings (a platform of its own, a toolset)."""
    services: Sequence[Service] = ()
    """Services started and stopped with the agent."""
    plugins: Sequence[Plugin] = ()
    """Features attached to the engine's hooks (``core.plugin``): limits, usage, trust, schedules..."""
    without: Sequence[str] = ()
    """Safety plugins the bot goes without, by name (``"loop-guard"``, ``"limits"``); every other one is on
    (``core.safety``)."""
    defined_at: str = field(default="", repr=False)
    """Where the bot was built (``file:line``), for errors about its definitions; filled in when empty."""

    def __post_init__(self) -> None:
        if not self.defined_at:
            caller = sys._getframe(2)  # (1: the dataclass's __init__; 2: whoever called Bot(...))
            self.defined_at = f"{caller.f_code.co_filename}:{caller.f_lineno}"
        if self.context is not None and not isinstance(self.context, Context):
            raise DefinitionError(
                f"Bot(name={self.name!r}, context=...): {type(self.context).__name__} is not a context; "
                "build one with core.context(type=..., schema=..., key=...)"
            )
        self.without = check_without(self.without, where="Bot")
        for field_, kind, helper in (("actions", Action, "action"), ("outputs", Output, "output")):
            for item in getattr(self, field_):
                if not isinstance(item, kind):
                    raise DefinitionError(
                        f"Bot(name={self.name!r}, {field_}=...): {type(item).__name__} is not an {helper}; "
                        f"build one with core.{helper}(...)"
                    )

    @property
    def typed_actions(self) -> list[Action[Any]]:
        """``actions`` as the engine holds them (each checked to be an ``Action`` when the bot was built)."""
        return [a for a in self.actions if isinstance(a, Action)]

    @property
    def typed_outputs(self) -> list[Output[Any, Any]]:
        """``outputs`` as the engine holds them (each checked to be an ``Output`` when the bot was built)."""
        return [o for o in self.outputs if isinstance(o, Output)]


def layer(platform: Context[Any], own: Context[Any]) -> Context[Any]:
    """``own`` laid over the platform's conversation context ``platform``: the platform's type, arguments, key,
    inputs and reply output; ``own``'s memory (``create``, ``load``, ``save``), ``render``, budgets and the contexts
    it ``uses``; both
    instructions (the platform's first), actions, outputs and hooks (the platform's first). A ``DefinitionError``
    when ``own``'s schema has a required field no platform's chat fills and it has no ``from_platform``."""
    _check_fillable(own)
    return dataclasses.replace(
        platform,
        create=own.create if own.create is not None else platform.create,
        render=own.render if own.render is not None else platform.render,
        load=own.load if own.load is not None else platform.load,
        save=own.save if own.save is not None else platform.save,
        description=own.description or platform.description,
        instructions=_joined_instructions(platform.instructions, own.instructions),
        max_steps=own.max_steps,
        max_working_memory=own.max_working_memory,
        max_prompt_tokens=own.max_prompt_tokens,
        keep_logs=own.keep_logs,
        working_memory=own.working_memory,
        uses=own.uses if own.uses is not None else platform.uses,
        actions=(*platform.actions, *own.actions),
        outputs=(*platform.outputs, *own.outputs),
        inputs=(*platform.inputs, *own.inputs),
        on_run=_both(platform.on_run, own.on_run),
        on_step=_both(platform.on_step, own.on_step),
        on_error=_both_errors(platform.on_error, own.on_error),
        while_running=_both_running(platform.while_running, own.while_running),
        should_continue=own.should_continue if own.should_continue is not None else platform.should_continue,
        laid_over=platform,
        laid=own,
        conversation=True,
    )


_SHARED = {
    "platform": "platform",
    "chat_id": "chat_id",
    "chat": "chat_id",
    "channel_id": "chat_id",
    "channel": "chat_id",
    "user_id": "user_id",
    "user": "user_id",
    "thread_id": "thread_id",
    "thread": "thread_id",
}
"""The fields of a bot's context's schema filled from a platform's chat by default, and what fills each."""


def _check_fillable(own: Context[Any]) -> None:
    """Say at start, not at each message, when ``own``'s arguments cannot be built from a platform's chat."""
    tp = own.schema.tp
    if own.from_platform is not None or not (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return
    unfilled = [n for n, f in tp.model_fields.items() if f.is_required() and n not in _SHARED]
    if unfilled:
        raise DefinitionError(
            f"context {own.type!r}: its schema's required field {unfilled[0]!r} is filled by no platform's chat; "
            "give the context from_platform=..., a function of core.PlatformChat (platform, chat_id, user_id, "
            "thread_id, args) returning its arguments, give the field a default, or name it one of "
            f"{', '.join(_SHARED)}"
        )


def platform_chat(platform: Context[Any], args: Any) -> PlatformChat:
    """The chat ``args`` names on ``platform`` in the words every platform shares (its ``chat_of``, else its key)."""
    if platform.chat_of is not None:
        return platform.chat_of(args)
    return PlatformChat(platform=platform.type.split(":", 1)[0], chat_id=platform.key(args), args=args)


def own_args(laid: Context[Any], args: Any) -> Any:
    """The bot's own arguments of the chat the platform's ``args`` name, on the context ``laid`` (a bot's context
    laid over a platform's): its ``from_platform``, else its schema's fields named after the chat's (``_SHARED``);
    a schema of ``str``, the chat id; one of anything, the platform's arguments as they are."""
    own, platform = laid.laid, laid.laid_over
    if own is None or platform is None:
        return args
    chat = platform_chat(platform, args)
    if own.from_platform is not None:
        return own.schema.validate(own.from_platform(chat))
    tp = own.schema.tp
    if tp is Any or tp is object:
        return args
    if tp is str:
        return chat.chat_id
    names = list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []
    if not names and dataclasses.is_dataclass(tp):
        names = [f.name for f in dataclasses.fields(tp)]
    values = {n: getattr(chat, _SHARED[n]) for n in names if n in _SHARED and getattr(chat, _SHARED[n]) is not None}
    try:
        return own.schema.validate(values)
    except ValidationError as exc:
        raise DefinitionError(
            f"context {own.type!r}: its arguments cannot be built from a {chat.platform} chat ({exc}); give the "
            "context from_platform=..., a function of core.PlatformChat (platform, chat_id, user_id, thread_id, "
            f"args) returning its arguments, or name its fields {', '.join(_SHARED)}"
        ) from exc


def _joined_instructions(
    first: str | Callable[[ContextState[Any]], str], second: str | Callable[[ContextState[Any]], str]
) -> str | Callable[[ContextState[Any]], str]:
    if not second:
        return first
    if not first:
        return second
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n{second}"

    def joined(state: ContextState[Any]) -> str:
        parts = (part(state) if callable(part) else part for part in (first, second))
        return "\n".join(p for p in parts if p)

    return joined


Hook = Callable[[ContextState[Any], "Host"], Any]


def _both(first: Hook | None, second: Hook | None) -> Hook | None:
    if first is None or second is None:
        return first or second

    async def both(state: ContextState[Any], host: Host) -> None:
        await maybe_await(first(state, host))
        await maybe_await(second(state, host))

    return both


ErrorHook = Callable[[Exception, ContextState[Any], "Host"], Any]


def _both_errors(first: ErrorHook | None, second: ErrorHook | None) -> ErrorHook | None:
    if first is None or second is None:
        return first or second

    async def both(exc: Exception, state: ContextState[Any], host: Host) -> None:
        await maybe_await(first(exc, state, host))
        await maybe_await(second(exc, state, host))

    return both


Running = Callable[[ContextState[Any], "Host"], AbstractAsyncContextManager[Any]]


def _both_running(first: Running | None, second: Running | None) -> Running | None:
    if first is None or second is None:
        return first or second

    @asynccontextmanager
    async def both(state: ContextState[Any], host: Host) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(first(state, host))
            await stack.enter_async_context(second(state, host))
            yield

    return both
