"""The framework's vocabulary, in one place because each part names the others: what a definition is (the
keyword-only dataclasses of actions, outputs, inputs, contexts, services and extensions), what handlers and hooks
receive (the state of a context instance, ``ContextState``, and the ``ActionContext``, ``OutputContext`` and
``InputContext`` given with it) and the agent as they see it (``Host``: the third argument of every handler, what
``install``/``start``/``subscribe`` receive; core depends on it, never on ``core.agent``).

A bot author builds definitions with the helpers of ``core.definitions`` (``action(...)``, ``output(...)``), which
check them and infer their types. ``ContextState`` and ``OutputContext`` are generic in what the definitions declare
(the context's arguments, the output's attributes), so a handler's annotations are checked against them; written
bare, they hold ``Any``. ``core.Agent`` satisfies ``Host``; a test may hand a handler a small stand-in.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, overload

from pydantic import BaseModel
from typing_extensions import TypeVar

from .call_format import CallFormat
from .chat_settings import ChatSettings
from .entries import ActionCall, EventRef, InputRef, Log, OutputRef, OutputRefResponse, WorkingMemory
from .errors import DefinitionError
from .media.attachment import Attachment, AttachmentKind, Loaded, human_size, loaded_of
from .media.reader import IMAGE_TYPES, READER, MediaLimits
from .prompt_sections import PromptSection
from .schema import Schema
from .slots import RunValues
from .statelog import StateLog

if TYPE_CHECKING:
    from .chat_settings import ChatPolicy, ChatSettingsStore
    from .events import RunEvent
    from .media.reader import Fetcher
    from .memory import MemoryStore
    from .models.base import Model
    from .reply_ledger import ReplyLedger
    from .slots import Slot

__all__ = (
    "Action",
    "ActionContext",
    "AnyAction",
    "AnyOutput",
    "ArgsNotOfTheContextsSchema",
    "ArgsT",
    "AttrsT",
    "Check",
    "Context",
    "ContextState",
    "ContextUse",
    "Extension",
    "Host",
    "Input",
    "InputContext",
    "Observer",
    "Output",
    "OutputContext",
    "OutputResult",
    "PlatformChat",
    "Send",
    "Service",
    "Setup",
    "maybe_await",
)

ArgsT = TypeVar("ArgsT", default=Any)
"""The validated arguments of a context instance (its context's ``schema``): invariant (its ``key`` takes them), so
that mypy checks the ``args`` of ``send(context, args, input)`` against the context's ``schema``."""
AttrsT = TypeVar("AttrsT", default=Any)
"""The validated attributes of an output (its ``attributes`` schema)."""

_EVENT_NAME = re.compile(r"^[A-Za-z_][\w:.\-]*$")


@dataclass(kw_only=True, eq=False)
class ContextState(Generic[ArgsT]):
    """One instance of a context (one chat, one channel) while the agent works on it; ``ContextState[Args]`` for
    a context whose ``schema`` is ``Args``."""

    id: str
    """``<type>:<key>``, the id memory is stored under."""
    context: Context[ArgsT]
    """The definition."""
    args: ArgsT
    """The validated arguments that identify the instance, of the type its author declared (``schema``): for a
    bot's context laid over a platform's, built from the platform's by ``from_platform``."""
    key: str
    """The instance key, from ``context.key(args)``."""
    memory: Any
    """The persistent memory of the instance (JSON-compatible), created by ``context.create``."""
    working_memory: WorkingMemory = field(repr=False)
    """The logs of the instance."""
    state_log: StateLog = field(default_factory=StateLog, repr=False)
    """The append-only state log that ``_outputPath`` writes to."""
    ledger: ReplyLedger | None = None
    """The reply ledger of a queued run (``core.reply_ledger``): a reply is stored before it is posted, so a run
    again posts nothing twice; None in one process."""
    chat: ChatSettings = field(default_factory=ChatSettings)
    """This conversation's settings as the run uses them (``/model``, ``/persona``; operator pins applied)."""
    values: RunValues = field(default_factory=RunValues, repr=False)
    """What plugins and handlers keep for this run, by slot (``core.slots.RunValues``): what it fetched from its
    inputs' attachments (``core.media.attachment.loaded_of``), the queued batch it answers
    (``core.reply_ledger.BATCH``), the platform message it answers (a platform's ``REPLY_TO``); never saved."""
    sections: dict[str, PromptSection] = field(default_factory=dict, repr=False)
    """What plugins show the model in this conversation's prompt, by name (``core.prompt_sections``: the facts
    kept, the knowledge passages found, the summary), set before the model call that shows them; never saved."""
    record: Callable[[Log], None] | None = field(default=None, repr=False)
    """How the running run adds an entry to working memory and to its chain (set by the step loop); None:
    straight into working memory."""
    platform_args: Any = None
    """The platform's arguments of this chat (``telegram:chat``'s ``ChatArgs``) when a bot's context is laid over a
    platform's; otherwise ``args`` (set when None). The platform's own code reads these, the author's ``args``."""
    used: list[ContextState[Any]] = field(default_factory=list, repr=False)
    """The instances of the other contexts this run uses (``Context.uses``: a user's profile beside the channel),
    loaded with this one, shown with it in ``<contexts>`` and saved with it; ``using`` finds one."""

    def __post_init__(self) -> None:
        if self.platform_args is None:
            self.platform_args = self.args

    def using(self, context: Context[Any]) -> ContextState[Any]:
        """The state of ``context``'s instance this run uses (``Context.uses``); ``KeyError`` when it uses none."""
        for state in self.used:
            if state.context is context or state.context.includes(context):
                return state
        raise KeyError(
            f"a run of {self.context.type!r} uses no {context.type!r} context: return a ContextUse of it "
            f"from the uses of {self.context.type!r}"
        )

    def emit(self, name: str, data: Any = None, *, processed: bool = False, source: str = "") -> EventRef:
        """Record that ``name`` happened (the seed's ``EventRef``): the model sees it in working memory, and
        in the next step's updates unless ``processed`` (an unprocessed event asks for another step)."""
        if not isinstance(name, str) or not _EVENT_NAME.match(name):
            raise DefinitionError(
                f"event name {name!r} is not a valid name: use letters, digits, '_', ':', '.' or '-', "
                "starting with a letter"
            )
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
        elif len(data) > (limit := _image_bytes(self.agent)):
            attachment.note = f"not shown: larger than {human_size(limit)}"
        else:
            loaded_of(self.state.values)[attachment.id] = Loaded(attachment=attachment, data=data)
        self.attachments.append(attachment)
        return attachment


def _image_bytes(agent: Host) -> int:
    """The largest picture the model is shown: the ``Media`` plugin's limit (``provided(READER)``), else the
    default."""
    reader = agent.provided(READER)
    return (reader.limits if reader is not None else MediaLimits()).image_bytes


@dataclass(kw_only=True, eq=False)
class OutputContext(Generic[AttrsT]):
    """What an output handler receives besides its content; ``OutputContext[Attrs]`` for an output whose
    ``attributes`` is ``Attrs``."""

    state: ContextState
    """The context instance the output belongs to."""
    output_ref: OutputRef
    """The output's log entry; its ``params`` are the tag's attributes as text."""
    agent: Host
    """The agent."""
    attributes: AttrsT
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


Observer = Callable[[str, str, float], Any]
"""``observer(kind, context_id, value)``: hooks for metrics. The agent reports ``model_seconds``, ``output``,
``run_seconds``, ``reply_seconds``, ``input_tokens``, ``output_tokens``, ``attachment:<kind>:<outcome>`` and
``attachment_bytes``; extensions and queues report more through ``Host.observe`` (``bots.metrics`` lists the
kinds it counts)."""

T = TypeVar("T")
"""What a slot holds (``Host.provide``)."""
Args = TypeVar("Args")
"""The arguments of a context's instances (``Context[Args]``), as ``send`` takes them."""
ModelArgs = TypeVar("ModelArgs", bound=BaseModel)
"""Arguments that are a pydantic model: ``send`` takes the model or a mapping it validates into one."""

Check = Callable[[], Any]
"""A readiness check: returns (or awaits to) ``True``/``None`` when ready, ``False`` or a reason string when
not, or raises; a ``Degraded`` reason is reported while the process stays ready."""


class Host(Protocol):
    """The agent as every handler and hook sees it (an action's, an output's, an input's, a context's): what it
    reads, what it sends and stops. What a feature keeps (its store, its reader, its settings) is found through
    what its plugin provides (``provided(USAGE)``, ``provided(READER)``); what an extension registers while it
    installs is ``Setup``'s. At most 20 members (``tests/core/test_host.py`` counts them)."""

    def provided(self, slot: Slot[T] | type[T]) -> T | None:
        """What was given under ``slot`` (a ``Slot`` or a class: ``host.provided(Facts)``), or None."""
        ...

    @property
    def model(self) -> Model:
        """The model every run uses."""
        ...

    @property
    def memory(self) -> MemoryStore:
        """Where context memory and working memory are kept."""
        ...

    @property
    def contexts(self) -> Mapping[str, Context]:
        """Contexts by type."""
        ...

    @property
    def sees_images(self) -> bool:
        """True when the model is given images."""
        ...

    @property
    def chat_policy(self) -> ChatPolicy:
        """The operator's rules for settings changed from the chat."""
        ...

    @property
    def chat_settings(self) -> ChatSettingsStore:
        """Each conversation's own settings."""
        ...

    def context_id(self, context: Context, args: Any) -> str:
        """``<type>:<key>`` of the instance ``args`` names."""
        ...

    def settings_parents(self, context: Context, args: Any) -> tuple[str, ...]:
        """The conversations whose chat settings this one starts from, nearest first."""
        ...

    async def chat_of(self, context_id: str, parents: Sequence[str] = ()) -> ChatSettings:
        """The settings a run of ``context_id`` uses."""
        ...

    def state_of(self, context_id: str) -> ContextState | None:
        """The state of the run of ``context_id`` going on in this process, None between runs."""
        ...

    def is_admin(self, user: str) -> bool:
        """True for a platform-qualified user id listed as an admin (``BOT_ADMIN_USERS``)."""
        ...

    @overload
    async def send(
        self,
        context: Context[ModelArgs],
        args: ModelArgs | Mapping[str, Any],
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> list[Log]: ...
    @overload
    async def send(
        self,
        context: Context[Args],
        args: Args,
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> list[Log]: ...
    @overload
    def send(  # (args not of the context's schema: mypy names the type it gets instead of "Cannot infer...")
        self,
        context: Context[Any],
        args: object,
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> ArgsNotOfTheContextsSchema: ...
    async def send(  # type: ignore[misc]
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> list[Log]:
        """Deliver an input to the instance ``args`` names: a ``Context[Args]`` takes ``Args`` (mypy checks it), a
        context whose arguments are a pydantic model also a mapping that validates into one."""
        ...

    async def say(self, state: ContextState, text: str) -> None:
        """Post ``text`` through the conversation's own reply output, from a handler during its run."""
        ...

    async def request_stop(self, context_id: str, *, by: str | None = None) -> bool:
        """A person pressed Stop in ``context_id``: stop its answer here and, with a queue, on the worker that holds
        the conversation; False when there was nothing to stop. ``by``: who pressed it when they are not the chat's
        admin (``NotAllowedError`` unless the answer is for them)."""
        ...

    async def forget_messages(self, context: Context, args: Any, message_ids: Collection[str]) -> int:
        """Platform messages of the instance ``args`` names were deleted by their authors: they leave what the bot
        keeps (``core.deleted``); how many entries went here (0 with a queue: its worker removes them)."""
        ...

    async def reset(self, context: Context, args: Any) -> None:
        """Forget the instance's memory (``/reset``)."""
        ...

    async def forget(self, context: Context, args: Any) -> None:
        """Erase everything about the instance, its history too (``/forget``)."""
        ...

    def observe(self, kind: str, context_id: str, value: float = 1.0) -> None:
        """Report ``value`` of ``kind`` for ``context_id`` to the observers."""
        ...

    def fail(self, error: BaseException) -> None:
        """Report an error a service cannot recover from; whoever runs the agent stops it."""
        ...


class Setup(Host, Protocol):
    """The agent as an extension's or a definition's ``install``, a plugin's ``attach``, a service's
    ``start``/``stop`` and an input's ``subscribe`` see it: ``Host``, and what plugs into the agent (each
    registration returns its undo), the operator's chat rules and the agent's lifecycle."""

    def add_readiness(self, name: str, check: Check) -> Callable[[], None]:
        """Register the readiness check ``name`` (``/readyz``); a second check of the same name replaces it."""
        ...

    def add_observer(self, observer: Observer) -> Callable[[], None]:
        """Have ``observer(kind, context_id, value)`` see what the agent measures (metrics)."""
        ...

    def add_event_listener(self, listener: Callable[[RunEvent], Any]) -> Callable[[], None]:
        """Have ``listener`` see the events of every run in this process (live replies, metrics)."""
        ...

    def add_action_source(self, source: Callable[[ContextState], Iterable[Action]]) -> Callable[[], None]:
        """Offer the actions ``source`` gives at each step (an MCP server's tools)."""
        ...

    def add_media_fetcher(self, source: str, fetch: Fetcher) -> Callable[[], None]:
        """Fetch the attachments whose ``source`` is ``source`` (a platform) with ``fetch``."""
        ...

    def provide(self, slot: Slot[T] | type[T], value: T) -> Callable[[], None]:
        """Keep ``value`` under ``slot``: a ``Slot`` (an extension's platform runtime) or a class (what a plugin
        provides: ``host.provide(Facts, self)``)."""
        ...

    def add_service(self, svc: Service, *, first: bool = False) -> Callable[[], None]:
        """Start ``svc`` with the agent (before the others when ``first``) and stop it in reverse order."""
        ...

    def pin_settings(self, context_id: str, pins: Mapping[str, str]) -> None:
        """Hold chat settings of ``context_id`` at the operator's values (``ChatPolicy.pinned``)."""
        ...

    @property
    def readiness_checks(self) -> Mapping[str, Check]:
        """The readiness checks registered so far, by name (read only)."""
        ...

    def stream(
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        reasoning: bool = True,
        switched: Literal["type", "item"] = "type",
    ) -> AsyncIterator[RunEvent]:
        """Send ``input`` and yield the run's events as they happen."""
        ...

    def stop_answer(self, context_id: str) -> bool:
        """Stop the answer being written in ``context_id`` in this process (Stop); False when there is none."""
        ...

    @property
    def stop_timeout(self) -> float:
        """Seconds ``stop()`` waits for running runs before cancelling them."""
        ...

    @property
    def distributed(self) -> bool:
        """True when a queue shared with other processes runs the contexts."""
        ...

    @property
    def running(self) -> bool:
        """True between ``start()`` and the beginning of ``stop()``."""
        ...

    @property
    def started(self) -> bool:
        """True once ``start()`` has finished (every service started, the model loaded, every input subscribed)
        until ``stop()`` begins: the agent answers (readiness)."""
        ...

    @property
    def failure(self) -> BaseException | None:
        """The error a service reported with ``fail``, else None."""
        ...

    async def failed(self) -> BaseException:
        """Wait until a service reports a fatal error; return it."""
        ...


Send = Callable[..., Awaitable[Any]]
"""What an input's ``subscribe`` receives: ``await send(context, args, data, ...)`` (``Host.send``)."""

ArgsT_co = TypeVar("ArgsT_co", covariant=True, default=Any)
"""The validated arguments of an action, or of a context's instances (its ``schema``)."""
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

OutputResult = OutputRefResponse | list[OutputRefResponse] | dict[str, Any] | list[dict[str, Any]] | None
"""What an output handler returns (or its coroutine returns), applied to the output's log entry: None keeps it as
written, an ``OutputRefResponse`` updates it (a list: each further one adds an entry), a dict updates its
``data``, ``params`` or ``processed`` (a list of such dicts, like a list of responses). mypy refuses anything else,
which the engine would drop (a list mixing responses with anything else is refused with an error)."""


async def maybe_await(value: Any) -> Any:
    """Await ``value`` if it is awaitable; handlers may be plain or ``async`` functions."""
    if inspect.isawaitable(value):
        return await value
    return value


class AnyAction(Protocol):
    """An action of whatever schema, as ``Bot(actions=[...])`` takes it. A protocol naming nothing of the schema,
    so that an ``action(...)`` written inline in the list is checked against its own ``schema`` (a list of
    ``Action[Any]`` would have mypy infer ``Any`` for it, and a handler written for another schema would pass)."""

    name: str
    description: str
    queue: str
    timeout: float


class AnyOutput(Protocol):
    """An output of whatever content and attributes, as ``Bot(outputs=[...])`` takes it (see ``AnyAction``)."""

    type: str
    description: str
    errors_to_model: bool


class ArgsNotOfTheContextsSchema:
    """What ``send(context, args, input)`` gives mypy when ``args`` are not of ``context``'s schema: nothing to
    await, so mypy's message on the call names this type (rather than "Cannot infer value of type parameter").
    Give ``args`` of the context's ``schema`` (a ``Context[ChatArgs]`` takes a ``ChatArgs``, or for a pydantic
    model a mapping of its fields)."""


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
    install: Callable[[Setup], Any] | None = None
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
    wait_for_input: float = 0.0
    """Seconds a ``†`` reference in a call's arguments to a value nothing has written yet (and no call of the same
    response writes) waits for an input that writes it, such as a data message (``data_input``); past that, the
    call fails with a result that says so. 0: it fails at once."""
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
    install: Callable[[Setup], Any] | None = None
    """Run once when the agent starts."""
    enabled: Callable[[ContextState], bool] | None = None
    """Offer the output only when this returns true for the context instance."""
    context: Context[Any] | None = None
    """Offer the output only in this context."""
    retry: int = 0
    """How many times the handler runs again after it raised or timed out, before the output counts as failed."""
    errors_to_model: bool = False
    """A handler that failed (after its retries) is an error the model reads in another step, as an action's is.
    By default it is handled here, as the Outputs seed has it: logged, and marked on the output's log entry
    (``OutputRef.error``, which working memory shows), with no model call for it. Content or attributes that break
    their schema, or a template that does not resolve, are the model's to fix: it always reads those."""


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
    subscribe: Callable[[Send, Setup], Any] | None = None
    """``subscribe(send, agent)`` starts listening and returns an unsubscribe callable (or awaitable)."""
    install: Callable[[Setup], Any] | None = None
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
    uses: Callable[[ContextState[ArgsT]], Sequence[ContextUse]] | None = None
    """The other contexts a run of this one uses, from its state (a user's profile beside a channel): their
    instances are loaded when the run starts, shown to the model in ``<contexts>`` after this one, offered their
    actions, given to handlers (``ctx.state.using(profile)``) and saved when the run ends, through the agent's
    memory store (a fleet's too). Each must be registered with the agent (``Bot.contexts``)."""
    working_memory: Literal["window", "run"] = "window"
    """``"window"``: a run's working memory goes on from the last run's (its newest ``keep_logs`` entries are kept,
    the newest ``max_working_memory`` shown): the conversation so far, which a chat bot answers from. ``"run"``: each
    run starts with an empty working memory, temporary for that run (the seed's Agent Lifecycle); it is still saved
    at the end of the run (the last run's, in the store) but never shown to a later one: what should last goes in
    the context's memory or state."""
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
    chat_of: Callable[[ArgsT], PlatformChat] | None = None
    """A platform's chat in the words every platform shares (chat, user, thread), from which a bot's context
    laid over it builds its own arguments; None: the chat is its key."""
    from_platform: Callable[[PlatformChat], ArgsT] | None = None
    """A bot's context laid over a platform's: its own arguments from the platform's chat; None: its schema's
    fields named ``platform``, ``chat_id``/``chat``/``channel_id``/``channel``, ``user_id``/``user`` or
    ``thread_id``/``thread`` take the chat's values (a ``str`` schema: the chat id)."""
    version: int = 1
    """The shape of the memory ``create`` makes: raise it when that shape changes (a key added: it is filled in
    from ``create``; anything else: with ``upgrade``); the version is kept beside each instance's memory."""
    upgrade: Callable[[Any, int], Any] | None = None
    """``upgrade(memory, version)``: memory kept by an older ``version`` of this context brought to this one's
    shape; keys ``create`` adds are filled in either way."""
    example_args: ArgsT | None = None
    """The arguments of a typical new instance (a platform's: a private chat), for what is prepared before any
    message arrives (the embedded model evaluates a first message's prompt in it while the bot starts,
    ``bots.warmup``); None: nothing is prepared for this context."""
    laid_over: Context[Any] | None = None
    """The platform context this one lays a bot's context over (same type, arguments and key); None otherwise."""
    laid: Context[Any] | None = None
    """The bot's context laid over ``laid_over`` (its memory, render, actions and outputs); None otherwise."""

    def includes(self, other: Context[Any]) -> bool:
        """True when ``other`` is this context, or one of the two it lays together (a platform's and a bot's)."""
        return other is self or (self.laid_over is not None and (other is self.laid_over or other is self.laid))


@dataclass(frozen=True, kw_only=True)
class PlatformChat:
    """One platform conversation in the words every platform shares: what a bot's own context builds its
    arguments from (``Context.from_platform``) wherever it runs."""

    platform: str
    """The platform: ``telegram``, ``discord``, ``web``, ``cli``."""
    chat_id: str
    """The chat (a Telegram chat, a Discord channel, thread or DM, a web visitor's chat, a terminal session)."""
    user_id: str | None = None
    """The person, where the chat is one person's (a private chat, a visitor, the terminal); None in a group."""
    thread_id: str | None = None
    """The thread or forum topic the chat is, if it is one."""
    args: Any = None
    """The platform's own arguments (``ChatArgs``, ``ChannelArgs``, a visitor or session id)."""


@dataclass(frozen=True, kw_only=True)
class ContextUse:
    """One context a run uses beside its own (``Context.uses``): which one, and the arguments of its instance."""

    context: Context[Any]
    """The context used (registered with the agent)."""
    args: Any
    """The arguments that name its instance (validated by its ``schema``)."""


@dataclass(kw_only=True, eq=False)
class Service:
    """Something an extension starts with the agent and stops with it (a client, a connection)."""

    name: str
    """For logs and errors."""
    start: Callable[[Setup], Any] | None = None
    """Called by ``agent.start()``."""
    stop: Callable[[Setup], Any] | None = None
    """Called by ``agent.stop()``, in reverse order of start."""


@dataclass(kw_only=True, eq=False)
class Extension:
    """A bundle of contexts, inputs, outputs, actions and services (one chat platform)."""

    name: str
    """Unique name."""
    install: Callable[[Setup], Any] | None = None
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
