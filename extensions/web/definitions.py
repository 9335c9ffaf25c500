"""The web chat's definitions: the ``web:chat`` context (one per visitor), the ``web:message`` input and output.

Nothing here serves HTTP: handlers reach the browser through the runtime bound to the agent by ``web_extension``
(``runtime.py``). A conversation's id is ``web:chat:<visitor>``; its user is ``web:<visitor>`` for the limits and
the usage counters, like a Telegram or Discord user.
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

from core.definitions import ContextState, InputContext, OutputContext, PlatformChat, context, input, output
from core.errors import ModelError
from core.slots import Slot

from ..chat.exactly_once import may_post
from ..chat.i18n import say
from ..chat.registry import RuntimeRegistry

if TYPE_CHECKING:
    from core import Host, Setup
    from core.definitions import Send
    from core.fleet.reply_ledger import ReplyLedger

__all__ = (
    "GATEWAY",
    "MESSAGE",
    "Runtime",
    "bind_runtime",
    "find_runtime",
    "get_runtime",
    "web_chat",
    "web_message_input",
    "web_message_output",
)

log = logging.getLogger("extensions.web")

MESSAGE = "web:message"
"""The type of the input (a visitor's message) and of the output (the bot's reply)."""
GATEWAY: Slot[str] = Slot("web:gateway")
"""Kept in ``ContextState.values`` (and its name in an input's params): the process holding the visitor's page
(a fleet's gateway id; empty in one process)."""


class Runtime(Protocol):
    """What the definitions need from the web side (``WebRuntime`` implements it)."""

    async def subscribe(self, send: Send, agent: Setup) -> Any: ...

    async def deliver(
        self, *, key: tuple[str, int, int], visitor: str, gateway: str, text: str, ledger: ReplyLedger | None = None
    ) -> list[str]: ...

    async def notify(self, *, visitor: str, gateway: str, text: str) -> None: ...

    def typing(self, visitor: str, gateway: str) -> AbstractAsyncContextManager[None]: ...

    async def abandon_replies(self, context_id: str) -> None: ...


_runtimes: RuntimeRegistry[Runtime] = RuntimeRegistry(platform="web", extension="web_extension")


def bind_runtime(agent: Setup, runtime: Runtime) -> None:
    """Make ``runtime`` the web side of ``agent`` (the extension's install hook does this)."""
    _runtimes.bind(agent, runtime)


def get_runtime(agent: Host) -> Runtime:
    """The web side of ``agent``; a ``ConfigError`` when the agent was built without the extension."""
    return _runtimes.get(agent)


def find_runtime(agent: Host) -> Runtime | None:
    """The web side of ``agent``, or None."""
    return _runtimes.find(agent)


def _instructions(state: ContextState) -> str:
    return (
        f"You are talking with one person on a web page. Answer with one {MESSAGE} output. You may use "
        "Markdown; keep answers short unless asked for detail."
    )


def _gateway(state: ContextState) -> str:
    return state.values.get(GATEWAY) or ""


async def _tell(state: ContextState, agent: Host, key: str) -> None:
    """Show the short notice ``key`` to the visitor, in the conversation's language (best effort)."""
    runtime = _runtimes.find(agent)
    if runtime is None or not may_post(state):
        return
    text = say(key, state.chat.language or agent.chat_policy.default_language)
    try:
        await runtime.notify(visitor=state.platform_args, gateway=_gateway(state), text=text)
    except Exception as exc:
        log.warning("could not tell a web visitor that no answer is coming: %s", exc)


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
    """Remember which process holds the visitor's page, so the reply reaches it."""
    ctx.state.values.put(GATEWAY, ctx.input_ref.params.get("gateway", ""))


async def _subscribe(send: Send, agent: Setup) -> Any:
    return await get_runtime(agent).subscribe(send, agent)


async def _post(text: str, ctx: OutputContext, agent: Host) -> None:
    """Deliver the reply to the visitor's pages: the answer shown while it was written gets its final text."""
    await get_runtime(agent).deliver(
        key=(ctx.state.id, ctx.step, ctx.index),
        visitor=ctx.state.platform_args,
        gateway=_gateway(ctx.state),
        text=text,
        ledger=ctx.state.ledger,
    )


def _while_running(state: ContextState, agent: Host) -> AbstractAsyncContextManager[Any]:
    runtime = _runtimes.find(agent)
    return runtime.typing(state.platform_args, _gateway(state)) if runtime is not None else contextlib.nullcontext()


web_chat = context(
    type="web:chat",
    schema=str,
    key=lambda visitor: visitor,
    description="A conversation with one visitor of the web chat",
    instructions=_instructions,
    while_running=_while_running,
    on_error=_on_error,
    conversation=True,
    chat_of=lambda visitor: PlatformChat(platform="web", chat_id=visitor, user_id=visitor, args=visitor),
    example_args="visitor",
)
"""The ``web:chat`` context, keyed by visitor id."""

web_message_input = input(type=MESSAGE, schema=str, handler=_on_input, subscribe=_subscribe, context=web_chat)
"""A visitor's message."""

web_message_output = output(
    type=MESSAGE,
    description="Send a message to the person on the web page you are talking with",
    instructions="Write the reply in Markdown.",
    schema=str,
    handler=_post,
    context=web_chat,
    examples=[f'<output type="{MESSAGE}">Hello! How can I help?</output>'],
)
"""The bot's reply."""
