"""Definitions a bot author writes: actions, outputs, inputs, contexts, extensions and services.

Each is a keyword-only dataclass built by a helper of the same name (``action(...)``, ``output(...)``),
which checks it at once so a mistake is a ``DefinitionError`` at import time, not a crash mid-run.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .call_format import CallFormat
from .chat_settings import ChatSettings
from .entries import ActionCall, EventRef, InputRef, Log, OutputRef, WorkingMemory
from .errors import DefinitionError
from .media.attachment import Attachment, AttachmentKind, Loaded, human_size
from .media.reader import IMAGE_TYPES
from .schema import Schema, as_schema
from .statelog import StateLog

if TYPE_CHECKING:
    from .host import Host

__all__ = (
    "Action",
    "ActionContext",
    "Context",
    "ContextState",
    "Extension",
    "Input",
    "InputContext",
    "Output",
    "OutputContext",
    "Service",
    "action",
    "context",
    "extension",
    "input",
    "maybe_await",
    "output",
    "service",
)

Send = Callable[..., Awaitable[Any]]
"""What an input's ``subscribe`` receives: ``await send(context, args, data, ...)`` (``Host.send``)."""

_NAME = re.compile(r"^[A-Za-z_][\w:.\-]*$")


async def maybe_await(value: Any) -> Any:
    """Await ``value`` if it is awaitable; handlers may be plain or ``async`` functions."""
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(kw_only=True, eq=False)
class ContextState:
    """One instance of a context (one chat, one channel) while the agent works on it."""

    id: str
    """``<type>:<key>``, the id memory is stored under."""
    context: Context
    """The definition."""
    args: Any
    """The validated arguments that identify the instance."""
    key: str
    """The instance key, from ``context.key(args)``."""
    memory: Any
    """The persistent memory of the instance (JSON-compatible), created by ``context.create``."""
    working_memory: WorkingMemory = field(repr=False)
    """The logs of the instance."""
    state_log: StateLog = field(default_factory=StateLog, repr=False)
    """The append-only state log that ``_outputPath`` writes to."""
    options: dict[str, Any] = field(default_factory=dict)
    """Per-run values handlers may share (for example the platform message being answered)."""
    summary: str = ""
    """The rolling summary of what left the working memory's window (with a history store)."""
    chat: ChatSettings = field(default_factory=ChatSettings)
    """This conversation's settings as the run uses them (``/model``, ``/persona``; operator pins applied)."""
    media: dict[str, Loaded] = field(default_factory=dict, repr=False)
    """What this run fetched from its inputs' attachments, by attachment id (image bytes, file text);
    never saved: later runs see the attachments' descriptions."""
    record: Callable[[Log], None] | None = field(default=None, repr=False)
    """How the running run adds an entry to working memory and to its chain (set by the step loop); None:
    straight into working memory."""

    def emit(self, name: str, data: Any = None, *, processed: bool = False, source: str = "") -> EventRef:
        """Record that ``name`` happened (the seed's ``EventRef``): the model sees it in working memory, and
        in the next step's updates unless ``processed`` (an unprocessed event asks for another step)."""
        _check_name(name, "event name")
        event = EventRef(name=name, data=data, processed=processed, source=source)
        if self.record is not None:
            self.record(event)
        else:
            self.working_memory.push(event)
        return event


@dataclass(kw_only=True, eq=False)
class ActionContext:
    """What an action handler receives besides its arguments."""

    state: ContextState
    """The context instance the action runs in."""
    call: ActionCall
    """The call being answered."""
    agent: Host
    """The agent."""
    attachments: list[Attachment] = field(default_factory=list)
    """Pictures shown to the model with the result (``show_image``)."""

    @property
    def memory(self) -> Any:
        """The context instance's persistent memory."""
        return self.state.memory

    def emit(self, name: str, data: Any = None, *, processed: bool = False) -> EventRef:
        """Record an event in the context (``ContextState.emit``), its source this action."""
        return self.state.emit(name, data, processed=processed, source=f"action:{self.call.name}")

    def show_image(self, data: bytes, *, mime: str, name: str = "") -> Attachment:
        """Show the model a picture with this call's result (an MCP tool's screenshot). A model that sees
        images gets it where the result stands, during this run (history keeps its description); any
        other model reads a note saying it was not shown."""
        attachment = Attachment(
            kind=AttachmentKind.IMAGE, name=name, mime=mime, size=len(data), source="action", ref=self.call.id
        )
        if not self.agent.sees_images:
            attachment.note = "not shown: this model reads text only"
        elif mime not in IMAGE_TYPES:
            attachment.note = f"not shown: {mime or 'this type'} is not an image type the model reads"
        elif len(data) > self.agent.media.limits.image_bytes:
            attachment.note = f"not shown: larger than {human_size(self.agent.media.limits.image_bytes)}"
        else:
            self.state.media[attachment.id] = Loaded(attachment=attachment, data=data)
        self.attachments.append(attachment)
        return attachment


@dataclass(kw_only=True, eq=False)
class OutputContext:
    """What an output handler receives besides its content."""

    state: ContextState
    """The context instance the output belongs to."""
    output_ref: OutputRef
    """The output's log entry; its ``params`` are the tag's attributes as text."""
    agent: Host
    """The agent."""
    attributes: Any = None
    """The validated attributes (the ``attributes`` model), or the raw dict when there is no schema."""
    step: int = 0
    """The step of the run that produced the output (1-based); with ``index``, the key of its run events."""
    index: int = -1
    """The output's element index within the step's response (``RunEvent.output_index``)."""

    @property
    def memory(self) -> Any:
        """The context instance's persistent memory."""
        return self.state.memory

    def emit(self, name: str, data: Any = None, *, processed: bool = False) -> EventRef:
        """Record an event in the context (``ContextState.emit``), its source this output."""
        return self.state.emit(name, data, processed=processed, source=f"output:{self.output_ref.type}")


@dataclass(kw_only=True, eq=False)
class InputContext:
    """What an input handler receives besides the data."""

    state: ContextState
    """The context instance the input goes to."""
    input_ref: InputRef
    """The input's log entry."""
    agent: Host
    """The agent."""


@dataclass(kw_only=True, eq=False)
class Action:
    """Something the model can call and get a result from."""

    name: str
    """Unique name, used in ``<action_call name="...">``."""
    description: str = ""
    """What the action does, shown to the model."""
    instructions: str = ""
    """When and how to use it, shown to the model."""
    schema: Schema
    """The arguments' schema."""
    handler: Callable[[Any, ActionContext, Host], Any]
    """``handler(args, ctx, agent)``, plain or async; its return value is the result."""
    returns: Schema | None = None
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
    context: Context | None = None
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


@dataclass(kw_only=True, eq=False)
class Output:
    """Something the model can say to the outside world (a chat message)."""

    type: str
    """Unique type, used in ``<output type="...">``."""
    description: str = ""
    """What the output does, shown to the model."""
    instructions: str = ""
    """When and how to use it, shown to the model."""
    schema: Schema
    """The content's schema (default ``str``)."""
    attributes: Schema | None = None
    """The schema of the tag's attributes, if it takes any."""
    handler: Callable[[Any, OutputContext, Host], Any] | None = None
    """``handler(data, ctx, agent)``, plain or async; may return a dict that updates the log entry."""
    format: Callable[[OutputRef], str] | None = None
    """How the output is shown to the model in working memory."""
    examples: Sequence[str] = ()
    """Example tags shown to the model."""
    install: Callable[[Host], Any] | None = None
    """Run once when the agent starts."""
    enabled: Callable[[ContextState], bool] | None = None
    """Offer the output only when this returns true for the context instance."""
    context: Context | None = None
    """Offer the output only in this context."""


@dataclass(kw_only=True, eq=False)
class Input:
    """A source of inputs: it subscribes to something outside and calls ``send``."""

    type: str
    """Unique type, shown to the model as ``<input type="...">``."""
    schema: Schema
    """The data's schema."""
    handler: Callable[[Any, InputContext, Host], Any] | None = None
    """``handler(data, ctx, agent)`` may transform the data before it is logged."""
    subscribe: Callable[[Send, Host], Any] | None = None
    """``subscribe(send, agent)`` starts listening and returns an unsubscribe callable (or awaitable)."""
    install: Callable[[Host], Any] | None = None
    """Run once when the agent starts."""
    format: Callable[[InputRef], str] | None = None
    """How the input is shown to the model."""
    context: Context | None = None
    """The context this input goes to."""


@dataclass(kw_only=True, eq=False)
class Context:
    """A kind of conversation; each instance (one chat) has its own memory and runs one at a time."""

    type: str
    """Unique type, for example ``telegram:chat``."""
    schema: Schema
    """The schema of the arguments that identify an instance."""
    key: Callable[[Any], str]
    """The instance key from the arguments."""
    create: Callable[[ContextState], Any] | None = None
    """Initial persistent memory for a new instance (default: an empty dict)."""
    render: Callable[[ContextState], str] | None = None
    """How the instance's state is shown to the model."""
    instructions: str | Callable[[ContextState], str] = ""
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
    on_run: Callable[[ContextState, Host], Any] | None = None
    """Called when a run finishes (before memory is saved)."""
    while_running: Callable[[ContextState, Host], AbstractAsyncContextManager[Any]] | None = None
    """An async context manager entered when a run starts (its memory loaded) and exited when the run
    ends, however it ends: for what lasts exactly as long as the run (a typing indicator)."""
    on_step: Callable[[ContextState, Host], Any] | None = None
    """Called after every step."""
    on_error: Callable[[Exception, ContextState, Host], Any] | None = None
    """Called when a run fails; the error is also logged."""
    should_continue: Callable[[ContextState, Host], bool] | None = None
    """Keep stepping even with nothing left to process while this returns true (bounded by max_steps)."""
    load: Callable[[str, Host], Any] | None = None
    """Load the persistent memory yourself instead of the agent's memory store."""
    save: Callable[[ContextState, Host], Any] | None = None
    """Save the persistent memory yourself instead of the agent's memory store."""
    settings_from: Callable[[Any], Any | None] | None = None
    """The arguments of the conversation whose chat settings (its choices and the operator's pins) this one starts
    from, or None (a Discord thread: its channel). What this conversation chose itself wins."""


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


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise DefinitionError(
            f"{what} {value!r} is not a valid name: use letters, digits, '_', ':', '.' or '-', starting with a letter"
        )


def _check_callable(value: Any, what: str) -> None:
    if value is not None and not callable(value):
        raise DefinitionError(f"{what} must be callable, got {type(value).__name__}")


def action(
    *,
    name: str,
    handler: Callable[[Any, ActionContext, Host], Any],
    description: str = "",
    instructions: str = "",
    schema: Any = None,
    returns: Any = None,
    examples: Sequence[str] = (),
    call_format: CallFormat = "json",
    enabled: Callable[[ContextState], bool] | None = None,
    install: Callable[[Host], Any] | None = None,
    context: Context | None = None,
    retry: int = 0,
    queue: str = "main",
    concurrency: int | None = None,
    timeout: float = 60.0,
    format: Callable[[Any], str] | None = None,
    on_error: Callable[[Exception, ActionContext, Host], Any] | None = None,
    fire_and_forget: bool | Literal["without_output_path"] = False,
) -> Action:
    """Define an action; ``schema`` is a pydantic model or type for the arguments (default: no arguments)."""
    _check_name(name, "action name")
    _check_callable(handler, f"action {name!r}: handler")
    if handler is None:
        raise DefinitionError(f"action {name!r} needs a handler")
    for attr, fn in (("enabled", enabled), ("install", install), ("format", format), ("on_error", on_error)):
        _check_callable(fn, f"action {name!r}: {attr}")
    if retry < 0 or timeout <= 0 or (concurrency is not None and concurrency < 1):
        raise DefinitionError(f"action {name!r}: retry >= 0, timeout > 0 and concurrency >= 1 are required")
    if call_format not in ("json", "xml"):
        raise DefinitionError(f"action {name!r}: call_format is 'json' or 'xml', got {call_format!r}")
    if fire_and_forget not in (True, False, "without_output_path"):
        raise DefinitionError(f"action {name!r}: fire_and_forget is True, False or 'without_output_path'")
    return Action(
        name=name,
        description=description,
        instructions=instructions,
        schema=as_schema(dict[str, Any] if schema is None else schema, what=f"action {name!r} schema"),
        handler=handler,
        returns=None if returns is None else as_schema(returns, what=f"action {name!r} returns"),
        examples=tuple(examples),
        call_format=call_format,
        enabled=enabled,
        install=install,
        context=context,
        retry=retry,
        queue=queue,
        concurrency=concurrency,
        timeout=timeout,
        format=format,
        on_error=on_error,
        fire_and_forget=fire_and_forget,
    )


def output(
    *,
    type: str,
    handler: Callable[[Any, OutputContext, Host], Any] | None = None,
    description: str = "",
    instructions: str = "",
    schema: Any = str,
    attributes: Any = None,
    format: Callable[[OutputRef], str] | None = None,
    examples: Sequence[str] = (),
    install: Callable[[Host], Any] | None = None,
    enabled: Callable[[ContextState], bool] | None = None,
    context: Context | None = None,
) -> Output:
    """Define an output; content defaults to a string, ``attributes`` is a model for the tag's attributes."""
    _check_name(type, "output type")
    for attr, fn in (
        ("handler", handler),
        ("format", format),
        ("install", install),
        ("enabled", enabled),
    ):
        _check_callable(fn, f"output {type!r}: {attr}")
    return Output(
        type=type,
        description=description,
        instructions=instructions,
        schema=as_schema(schema, what=f"output {type!r} schema"),
        attributes=None if attributes is None else as_schema(attributes, what=f"output {type!r} attributes"),
        handler=handler,
        format=format,
        examples=tuple(examples),
        install=install,
        enabled=enabled,
        context=context,
    )


def input(
    *,
    type: str,
    schema: Any = str,
    handler: Callable[[Any, InputContext, Host], Any] | None = None,
    subscribe: Callable[[Send, Host], Any] | None = None,
    install: Callable[[Host], Any] | None = None,
    format: Callable[[InputRef], str] | None = None,
    context: Context | None = None,
) -> Input:
    """Define an input type; ``subscribe(send, agent)`` is started by ``agent.start()``."""
    _check_name(type, "input type")
    for attr, fn in (
        ("handler", handler),
        ("subscribe", subscribe),
        ("install", install),
        ("format", format),
    ):
        _check_callable(fn, f"input {type!r}: {attr}")
    return Input(
        type=type,
        schema=as_schema(schema, what=f"input {type!r} schema"),
        handler=handler,
        subscribe=subscribe,
        install=install,
        format=format,
        context=context,
    )


def _default_key(args: Any) -> str:
    if args is None:
        return "default"
    if isinstance(args, dict):
        return ":".join(str(v) for v in args.values()) or "default"
    if hasattr(args, "model_dump"):
        return ":".join(str(v) for v in args.model_dump().values()) or "default"
    return str(args)


def context(
    *,
    type: str,
    schema: Any = None,
    key: Callable[[Any], str] | None = None,
    create: Callable[[ContextState], Any] | None = None,
    render: Callable[[ContextState], str] | None = None,
    instructions: str | Callable[[ContextState], str] = "",
    description: str = "",
    max_steps: int = 5,
    max_working_memory: int = 40,
    max_prompt_tokens: int = 6000,
    keep_logs: int = 200,
    actions: Sequence[Action] = (),
    outputs: Sequence[Output] = (),
    inputs: Sequence[Input] = (),
    on_run: Callable[[ContextState, Host], Any] | None = None,
    while_running: Callable[[ContextState, Host], AbstractAsyncContextManager[Any]] | None = None,
    on_step: Callable[[ContextState, Host], Any] | None = None,
    on_error: Callable[[Exception, ContextState, Host], Any] | None = None,
    should_continue: Callable[[ContextState, Host], bool] | None = None,
    load: Callable[[str, Host], Any] | None = None,
    save: Callable[[ContextState, Host], Any] | None = None,
    settings_from: Callable[[Any], Any | None] | None = None,
) -> Context:
    """Define a context; ``schema`` validates the arguments and ``key(args)`` names the instance."""
    _check_name(type, "context type")
    for attr, fn in (
        ("key", key),
        ("create", create),
        ("render", render),
        ("on_run", on_run),
        ("while_running", while_running),
        ("on_step", on_step),
        ("on_error", on_error),
        ("should_continue", should_continue),
        ("load", load),
        ("save", save),
        ("settings_from", settings_from),
    ):
        _check_callable(fn, f"context {type!r}: {attr}")
    if max_steps < 1 or max_working_memory < 0 or keep_logs < max_working_memory:
        raise DefinitionError(f"context {type!r}: max_steps >= 1 and keep_logs >= max_working_memory >= 0 are required")
    names = [a.name for a in actions]
    if len(set(names)) != len(names):
        raise DefinitionError(f"context {type!r}: two actions share a name in {names}")
    return Context(
        type=type,
        schema=as_schema(Any if schema is None else schema, what=f"context {type!r} schema"),
        key=key or _default_key,
        create=create,
        render=render,
        instructions=instructions,
        description=description,
        max_steps=max_steps,
        max_working_memory=max_working_memory,
        max_prompt_tokens=max_prompt_tokens,
        keep_logs=keep_logs,
        actions=tuple(actions),
        outputs=tuple(outputs),
        inputs=tuple(inputs),
        on_run=on_run,
        while_running=while_running,
        on_step=on_step,
        on_error=on_error,
        should_continue=should_continue,
        load=load,
        save=save,
        settings_from=settings_from,
    )


def service(
    *,
    name: str,
    start: Callable[[Host], Any] | None = None,
    stop: Callable[[Host], Any] | None = None,
) -> Service:
    """Define a service started and stopped with the agent."""
    _check_callable(start, f"service {name!r}: start")
    _check_callable(stop, f"service {name!r}: stop")
    return Service(name=name, start=start, stop=stop)


def extension(
    *,
    name: str,
    install: Callable[[Host], Any] | None = None,
    contexts: Sequence[Context] = (),
    inputs: Sequence[Input] = (),
    outputs: Sequence[Output] = (),
    actions: Sequence[Action] = (),
    services: Sequence[Service] = (),
) -> Extension:
    """Define an extension: a named bundle of definitions."""
    _check_name(name, "extension name")
    _check_callable(install, f"extension {name!r}: install")
    return Extension(
        name=name,
        install=install,
        contexts=tuple(contexts),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        actions=tuple(actions),
        services=tuple(services),
    )
