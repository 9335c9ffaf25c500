"""The log entries of working memory: what came in, what the model thought, called and said."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pydantic

from .media.attachment import Attachment
from .unicode_text import repair_strings

__all__ = (
    "ActionCall",
    "ActionResult",
    "ErrorLog",
    "EventRef",
    "InputRef",
    "Log",
    "OutputRef",
    "OutputRefResponse",
    "Thought",
    "WorkingMemory",
    "new_id",
    "now_ms",
)

_counter = itertools.count()
_prefix = os.urandom(4).hex()


def _renew_prefix() -> None:
    """A forked child's own prefix: with its parent's it would make the same ids (a pre-forking server, a fork
    server, ``multiprocessing`` with ``fork``)."""
    global _counter, _prefix
    _counter = itertools.count()
    _prefix = os.urandom(4).hex()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_renew_prefix)


def new_id() -> str:
    """A short id, unique within this process and very likely across processes (a forked child included)."""
    return f"{_prefix}{next(_counter):x}"


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


class _Base(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")

    id: str = pydantic.Field(default_factory=new_id)
    """Unique id of the entry."""
    timestamp: int = pydantic.Field(default_factory=now_ms)
    """When the entry was written, in ms since the epoch."""
    processed: bool = False
    """True once the model has been shown the entry in a step."""

    @pydantic.model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        """Every string of the entry is valid Unicode (``core.unicode_text``): a lone surrogate from a platform,
        an action or a stored payload would break the model request, the history and working memory's JSON."""
        return repair_strings(data)


class InputRef(_Base):
    """An input that reached the context (a user's message, an event)."""

    kind: Literal["input"] = "input"
    type: str
    """The input type, for example ``telegram:message``."""
    data: Any = None
    """The validated input data."""
    params: dict[str, str] = pydantic.Field(default_factory=dict)
    """Attributes shown with the input (user name, message id)."""
    hidden: list[str] = pydantic.Field(default_factory=list)
    """Names of ``params`` the prompt does not show, though code reads them: what goes without saying where the
    input was received (the person's id in a one-person chat, the tier everyone there has: ``core.prompt``)."""
    text: str | None = None
    """How the input is shown to the model, when the input's ``format`` gave one."""
    correlation_id: str | None = None
    """The id of the incoming message, carried through queues into the logs of the run (``core.trace``)."""
    attachments: list[Attachment] = pydantic.Field(default_factory=list)
    """Pictures, voice messages and files sent with it: references, fetched when the run starts."""


class OutputRef(_Base):
    """An output the model produced (a reply to the user)."""

    kind: Literal["output"] = "output"
    type: str
    """The output type, for example ``cli:message``."""
    content: str = ""
    """The raw content the model wrote inside the tag."""
    data: Any = None
    """The validated content (after templates were resolved)."""
    params: dict[str, str] = pydantic.Field(default_factory=dict)
    """The attributes written on the tag."""
    error: str | None = None
    """Why the output was refused or failed, if it was."""
    text: str | None = None
    """How the output is shown to the model, when the output's ``format`` gave one."""


@dataclass(kw_only=True, slots=True)
class OutputRefResponse:
    """What an output handler may return (or a list of them, one log entry each) to change the output's log
    entry: the first updates the entry, each further one adds an entry of the same output after it."""

    data: Any = None
    """The entry's data (what working memory and the history show); None keeps the validated content."""
    params: Mapping[str, Any] | None = None
    """The entry's attributes, replacing the tag's (values become strings); None keeps them."""
    processed: bool = True
    """False keeps the entry in the next step's updates, so the model sees it again (and is called again)."""


class ActionCall(_Base):
    """A call of an action that the model wrote."""

    kind: Literal["action_call"] = "action_call"
    name: str
    """The action's name."""
    content: str = ""
    """The raw arguments the model wrote."""
    data: Any = None
    """The validated arguments."""
    params: dict[str, str] = pydantic.Field(default_factory=dict)
    """Other attributes written on the tag."""


class ActionResult(_Base):
    """What an action returned, or why it failed."""

    kind: Literal["action_result"] = "action_result"
    call_id: str
    """The id of the ``ActionCall`` this answers."""
    name: str
    """The action's name."""
    data: Any = None
    """The returned value (JSON-compatible)."""
    error: str | None = None
    """Why the call failed, if it did."""
    text: str | None = None
    """How the result is shown to the model, when the action's ``format`` gave one."""
    attachments: list[Attachment] = pydantic.Field(default_factory=list)
    """Pictures the action showed with its result (``ActionContext.show_image``)."""


class Thought(_Base):
    """The model's reasoning for a step."""

    kind: Literal["thought"] = "thought"
    content: str
    """The reasoning text."""


class ErrorLog(_Base):
    """A problem the model must see and may react to (unknown tag target, bad template, handler error)."""

    kind: Literal["error"] = "error"
    message: str
    """What went wrong and what to do instead."""
    source: str = ""
    """What produced the error: ``output:cli:message``, ``action:remember``, ``model``."""


class EventRef(_Base):
    """Something that happened, recorded by the context (``state.emit``, ``ctx.emit`` in a handler): the seed's
    ``EventRef``, shown to the model in working memory (and in the next step's updates unless ``processed``)."""

    kind: Literal["event"] = "event"
    name: str
    """What happened, for example ``fact_saved``."""
    data: Any = None
    """Its details (JSON-compatible)."""
    source: str = ""
    """Who recorded it: ``action:remember``, ``output:chat:message``, or empty for the context itself."""


Log = Annotated[
    InputRef | OutputRef | ActionCall | ActionResult | Thought | ErrorLog | EventRef,
    pydantic.Field(discriminator="kind"),
]
"""One entry of working memory."""

_log_adapter: pydantic.TypeAdapter[Log] = pydantic.TypeAdapter(Log)
_logs_adapter: pydantic.TypeAdapter[list[Log]] = pydantic.TypeAdapter(list[Log])


class WorkingMemory:
    """The logs of one context, oldest first, kept to a bounded length.

    Entries that were already processed when memory was last loaded or saved (settled) do not change any more, so
    their JSON form and their text in the prompt are kept and reused: saving and prompting cost the new entries,
    not the whole history. The settled entries at the front are not scanned again for unprocessed ones.
    """

    __slots__ = ("_dumped", "_last", "_raw", "_shown", "limit", "logs")

    def __init__(self, logs: list[Log] | None = None, *, limit: int = 200) -> None:
        self.logs: list[Log] = logs or []
        """The entries, oldest first."""
        self.limit = limit
        """How many entries are kept; older ones are dropped when the memory is saved."""
        self._raw: dict[str, dict[str, Any]] = {}
        self._shown: dict[str, str] = {}
        self._dumped: list[dict[str, Any]] = []  # the JSON form of the settled entries at the front
        self._last: Log | None = None  # the last of them, to notice a list changed other than at its end

    def push(self, log: Log) -> None:
        """Append an entry."""
        self.logs.append(log)

    def _settled(self) -> int:
        """How many entries at the front are settled; 0 once the list was changed other than by ``push``,
        ``trim`` or removing a later entry."""
        n = len(self._dumped)
        if n and (len(self.logs) < n or self.logs[n - 1] is not self._last):
            self._dumped, self._last = [], None
            return 0
        return n

    def _settle(self, dumped: list[dict[str, Any]], n: int) -> None:
        """The first ``n`` entries are settled now (``dumped``: the JSON form of every entry, at least those)."""
        self._dumped = dumped[:n]
        self._last = self.logs[n - 1] if n else None

    def unprocessed(self) -> list[Log]:
        """Entries the model has not been shown yet, oldest first."""
        logs, n = self.logs, len(self._dumped)
        if n and (len(logs) < n or logs[n - 1] is not self._last):
            n = self._settled()  # the list was changed: read it all
        return [log for log in (logs[n:] if n else logs) if not log.processed]

    def trim(self) -> None:
        """Drop the oldest entries beyond ``limit``, a quarter of it at a time (``trim_step``): the entries kept start
        at the same one for several runs, and so does a prompt that shows them all. Dropped one at a time, the
        first entry changed at every message once the conversation was past ``limit``, and with it every request's
        prompt from its working memory on: nothing after the fixed sections was a prefix a provider had seen
        (``bench/prompt_cost.py``)."""
        excess = len(self.logs) - self.limit
        if excess > 0:
            step = self.trim_step
            excess = min(len(self.logs), -(-excess // step) * step)
            n = self._settled()
            for log in self.logs[:excess]:
                self._raw.pop(log.id, None)
                self._shown.pop(log.id, None)
            self.logs = self.logs[excess:]
            self._dumped = self._dumped[excess:] if n > excess else []
            if n <= excess:
                self._last = None

    @property
    def trim_step(self) -> int:
        """How many entries ``trim`` drops at a time: a quarter of ``limit`` (at least one)."""
        return max(1, self.limit // 4)

    def prompt_texts(self) -> dict[str, str]:
        """The text of entries as the full prompt shows them, by id, for ``keep_text`` to fill."""
        return self._shown

    def keep_text(self, log: Log, text: str) -> None:
        """Keep ``text``, ``log`` as the full prompt shows it, if the entry is settled and has no attachments (a
        prompt shows the same entries at every step; what an attachment shows depends on the run)."""
        if log.id in self._raw and not (isinstance(log, InputRef | ActionResult) and log.attachments):
            self._shown[log.id] = text

    def dump(self) -> list[dict[str, Any]]:
        """A JSON-compatible form for a memory store."""
        n = self._settled()
        out = self._dumped[:n]
        raw = self._raw
        logs = self.logs
        settled = len(logs)  # up to the first entry that is not processed
        for i in range(n, len(logs)):
            log = logs[i]
            entry = raw.get(log.id)  # an entry found here was processed, and is still
            if entry is None:
                entry = _log_adapter.dump_python(log, mode="json")
                if log.processed:
                    raw[log.id] = entry
                elif i < settled:
                    settled = i
            out.append(entry)
        self._settle(out, settled)
        return out

    @classmethod
    def load(cls, raw: Any, *, limit: int) -> WorkingMemory:
        """Rebuild from what ``dump`` produced; anything unreadable starts an empty memory."""
        if not raw:
            return cls(limit=limit)
        try:
            logs = _logs_adapter.validate_python(raw)
        except pydantic.ValidationError:
            return cls(limit=limit)
        memory = cls(logs, limit=limit)
        memory._raw = {log.id: entry for log, entry in zip(logs, raw, strict=True) if log.processed}
        memory._settle(list(raw), next((i for i, log in enumerate(logs) if not log.processed), len(logs)))
        return memory
