"""What a definition is: the keyword-only dataclasses of actions, outputs, inputs, contexts, services and
extensions, generic in their schemas. A bot author builds them with the helpers of ``core.definitions``
(``action(...)``, ``output(...)``), which check them and infer their types."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal

from typing_extensions import TypeVar

from .call_format import CallFormat
from .entries import InputRef, OutputRef, OutputRefResponse
from .handler_context import ActionContext, ContextState, InputContext, OutputContext
from .schema import Schema

if TYPE_CHECKING:
    from .host import Host

__all__ = ("Action", "Context", "Extension", "Input", "Output", "OutputResult", "Send", "Service", "maybe_await")

Send = Callable[..., Awaitable[Any]]
"""What an input's ``subscribe`` receives: ``await send(context, args, data, ...)`` (``Host.send``)."""

ArgsT_co = TypeVar("ArgsT_co", covariant=True, default=Any)
"""The validated arguments of an action, or of a context's instances (its ``schema``)."""
ArgsT = TypeVar("ArgsT", default=Any)
"""The validated arguments of a context's instances: invariant (its ``key`` takes them), so that mypy checks
the ``args`` of ``send(context, args, input)`` against the context's ``schema``."""
DataT_co = TypeVar("DataT_co", covariant=True, default=Any)
"""The validated content of an output, or data of an input (its ``schema``)."""
AttrsT_co = TypeVar("AttrsT_co", covariant=True, default=Any)
"""The validated attributes of an output (its ``attributes``)."""
S = TypeVar("S")
"""What a helper's ``schema`` validates into, inferred from the model or type given."""
A = TypeVar("A", default=dict[str, str])
"""What a helper's ``attributes`` validates into (without one, the tag's attributes as text)."""
H = TypeVar("H", bound="Host", default="Host")
"""The agent as a handler annotates it: ``Host``, or ``Agent``, which is one."""

OutputResult = OutputRefResponse | list[OutputRefResponse] | dict[str, Any] | None
"""What an output handler returns (or its coroutine returns), applied to the output's log entry: None keeps it as
written, an ``OutputRefResponse`` updates it (a list: each further one adds an entry), a dict updates its
``data``, ``params`` or ``processed``. mypy refuses anything else, which the engine would silently drop."""


async def maybe_await(value: Any) -> Any:
    """Await ``value`` if it is awaitable; handlers may be plain or ``async`` functions."""
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(kw_only=True, eq=False)
class Action(Generic[ArgsT_co]):
    """Something the model can call and get a result from; ``Action[Args]`` takes ``Args``."""

    name: str
    """Unique name, used in ``<action_call name="...">``."""
    description: str = ""
    """What the action does, shown to the model."""
    instructions: str = ""
    """When and how to use it, shown to the model."""
    schema: Schema[ArgsT_co]
    """The arguments' schema."""
    handler: Callable[[ArgsT_co, ActionContext, Host], Any]
    """``handler(args, ctx, agent)``, plain or async; its return value is the result."""
    returns: Schema[Any] | None = None
    """The result's schema, shown to the model and used to validate the result."""
    examples: Sequence[str] = ()
    """Example calls shown to the model."""
    call_format: CallFormat = "json"
    """How the model writes the arguments: a JSON object, or ``"xml"``, one element per argument
    (``<city>Paris</city>``; ``core/call_format.py``)."""
    enabled: Callable[[ContextState], bool] | None = None
    """Offer the action only when this returns true for the context instance."""
    install: Callable[[Host], Any] | None = None
    """Run once when the agent starts."""
    context: Context[Any] | None = None
    """Offer the action only in this context."""
    retry: int = 0
    """How many times to retry the handler after an exception."""
    queue: str = "main"
    """The task-runner queue the handler runs in."""
    concurrency: int | None = None
    """At most this many calls of this action run at once across the agent (None: the queue's limit)."""
    timeout: float = 60.0
    """Seconds before a call is abandoned with a timeout error result."""
    format: Callable[[Any], str] | None = None
    """How the result is shown to the model (default: JSON)."""
    on_error: Callable[[Exception, ActionContext, Host], Any] | None = None
    """Called when the handler fails for good; a non-None return value becomes the result."""
    fire_and_forget: bool | Literal["without_output_path"] = False
    """``True``: a call is not waited for (it runs to completion in the task runner, its result is not shown
    to the model); ``"without_output_path"``: only a call that writes no ``_outputPath`` is not waited for."""
    address: str | None = None
    """The name the operator's policy calls it by (``core.trust``; an MCP tool: ``mcp:<server>:<tool>``); None:
    its ``name``."""


@dataclass(kw_only=True, eq=False)
class Output(Generic[DataT_co, AttrsT_co]):
    """Something the model can say to the outside world (a chat message); ``Output[Data, Attrs]`` has content
    ``Data`` and attributes ``Attrs``."""

    type: str
    """Unique type, used in ``<output type="...">``."""
    description: str = ""
    """What the output does, shown to the model."""
    instructions: str = ""
    """When and how to use it, shown to the model."""
    schema: Schema[DataT_co]
    """The content's schema (default ``str``)."""
    attributes: Schema[AttrsT_co] | None = None
    """The schema of the tag's attributes, if it takes any."""
    handler: Callable[[DataT_co, OutputContext[AttrsT_co], Host], OutputResult | Awaitable[OutputResult]] | None = None
    """``handler(data, ctx, agent)``, plain or async; what it returns may update the log entry (``OutputResult``)."""
    format: Callable[[OutputRef], str] | None = None
    """How the output is shown to the model in working memory."""
    examples: Sequence[str] = ()
    """Example tags shown to the model."""
    install: Callable[[Host], Any] | None = None
    """Run once when the agent starts."""
    enabled: Callable[[ContextState], bool] | None = None
    """Offer the output only when this returns true for the context instance."""
    context: Context[Any] | None = None
    """Offer the output only in this context."""


@dataclass(kw_only=True, eq=False)
class Input(Generic[DataT_co]):
    """A source of inputs: it subscribes to something outside and calls ``send``; ``Input[Data]`` takes
    ``Data``."""

    type: str
    """Unique type, shown to the model as ``<input type="...">``."""
    schema: Schema[DataT_co]
    """The data's schema."""
    handler: Callable[[DataT_co, InputContext, Host], Any] | None = None
    """``handler(data, ctx, agent)`` may transform the data before it is logged."""
    subscribe: Callable[[Send, Host], Any] | None = None
    """``subscribe(send, agent)`` starts listening and returns an unsubscribe callable (or awaitable)."""
    install: Callable[[Host], Any] | None = None
    """Run once when the agent starts."""
    format: Callable[[InputRef], str] | None = None
    """How the input is shown to the model."""
    context: Context[Any] | None = None
    """The context this input goes to."""


@dataclass(kw_only=True, eq=False)
class Context(Generic[ArgsT]):
    """A kind of conversation; each instance (one chat) has its own memory and runs one at a time;
    ``Context[Args]`` names its instances with ``Args``."""

    type: str
    """Unique type, for example ``telegram:chat``."""
    schema: Schema[ArgsT]
    """The schema of the arguments that identify an instance."""
    key: Callable[[ArgsT], str]
    """The instance key from the arguments."""
    create: Callable[[ContextState[ArgsT]], Any] | None = None
    """Initial persistent memory for a new instance (default: an empty dict)."""
    render: Callable[[ContextState[ArgsT]], str] | None = None
    """How the instance's state is shown to the model."""
    instructions: str | Callable[[ContextState[ArgsT]], str] = ""
    """Instructions for the model in this context."""
    description: str = ""
    """What this context is, shown to the model."""
    max_steps: int = 5
    """At most this many model calls per run."""
    max_working_memory: int = 40
    """At most this many past entries are shown to the model."""
    max_prompt_tokens: int = 6000
    """Approximate token budget of the working-memory part of the prompt."""
    keep_logs: int = 200
    """At most this many entries of working memory are kept in the store."""
    actions: Sequence[Action] = ()
    """Actions offered only in this context."""
    outputs: Sequence[Output] = ()
    """Outputs offered only in this context."""
    inputs: Sequence[Input] = ()
    """Inputs that feed this context."""
    on_run: Callable[[ContextState[ArgsT], Host], Any] | None = None
    """Called when a run finishes (before memory is saved)."""
    while_running: Callable[[ContextState[ArgsT], Host], AbstractAsyncContextManager[Any]] | None = None
    """An async context manager entered when a run starts (its memory loaded) and exited when the run
    ends, however it ends: for what lasts exactly as long as the run (a typing indicator)."""
    on_step: Callable[[ContextState[ArgsT], Host], Any] | None = None
    """Called after every step."""
    on_error: Callable[[Exception, ContextState[ArgsT], Host], Any] | None = None
    """Called when a run fails; the error is also logged."""
    should_continue: Callable[[ContextState[ArgsT], Host], bool] | None = None
    """Keep stepping even with nothing left to process while this returns true (bounded by max_steps)."""
    load: Callable[[str, Host], Any] | None = None
    """Load the persistent memory yourself instead of the agent's memory store."""
    save: Callable[[ContextState[ArgsT], Host], Any] | None = None
    """Save the persistent memory yourself instead of the agent's memory store."""
    settings_from: Callable[[ArgsT], Any | None] | None = None
    """The arguments of the conversation whose chat settings (its choices and the operator's pins) this one starts
    from, or None (a Discord thread: its channel). What this conversation chose itself wins."""
    conversation: bool = False
    """A platform's chat (keyed by its channel): a bot's own context is laid over it (``core.bot.layer``)."""
    laid_over: Context[Any] | None = None
    """The platform context this one lays a bot's context over (same type, arguments and key); None otherwise."""
    laid: Context[Any] | None = None
    """The bot's context laid over ``laid_over`` (its memory, render, actions and outputs); None otherwise."""

    def includes(self, other: Context[Any]) -> bool:
        """True when ``other`` is this context, or one of the two it lays together (a platform's and a bot's)."""
        return other is self or (self.laid_over is not None and (other is self.laid_over or other is self.laid))


@dataclass(kw_only=True, eq=False)
class Service:
    """Something an extension starts with the agent and stops with it (a client, a connection)."""

    name: str
    """For logs and errors."""
    start: Callable[[Host], Any] | None = None
    """Called by ``agent.start()``."""
    stop: Callable[[Host], Any] | None = None
    """Called by ``agent.stop()``, in reverse order of start."""


@dataclass(kw_only=True, eq=False)
class Extension:
    """A bundle of contexts, inputs, outputs, actions and services (one chat platform)."""

    name: str
    """Unique name."""
    install: Callable[[Host], Any] | None = None
    """Run once when the agent starts, before services start."""
    contexts: Sequence[Context] = ()
    """Contexts the extension brings."""
    inputs: Sequence[Input] = ()
    """Inputs the extension brings."""
    outputs: Sequence[Output] = ()
    """Outputs the extension brings."""
    actions: Sequence[Action] = ()
    """Actions the extension brings."""
    services: Sequence[Service] = ()
    """Services started with the agent."""
