"""What handlers and hooks receive: the state of a context instance (``ContextState``) and, with it, what an
action, output or input handler is given (``ActionContext``, ``OutputContext``, ``InputContext``).

``ContextState`` and ``OutputContext`` are generic in what the definitions declare (the context's arguments, the
output's attributes), so a handler's annotations are checked against them; written bare, they hold ``Any``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from .chat_settings import ChatSettings
from .entries import ActionCall, EventRef, InputRef, Log, OutputRef, WorkingMemory
from .errors import DefinitionError
from .media.attachment import Attachment, AttachmentKind, Loaded, human_size
from .media.reader import IMAGE_TYPES
from .statelog import StateLog

if TYPE_CHECKING:
    from .definitions import Context
    from .host import Host

__all__ = ("ActionContext", "ArgsT", "AttrsT", "ContextState", "InputContext", "OutputContext")

ArgsT = TypeVar("ArgsT", default=Any)
"""The validated arguments of a context instance (its context's ``schema``)."""
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
        elif len(data) > self.agent.media.limits.image_bytes:
            attachment.note = f"not shown: larger than {human_size(self.agent.media.limits.image_bytes)}"
        else:
            self.state.media[attachment.id] = Loaded(attachment=attachment, data=data)
        self.attachments.append(attachment)
        return attachment


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
