"""Typed run events (seed: Ailoy Agent Response Format): a run as a stream a UI can render as it happens."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ("EventEmitter", "RunEvent", "RunEventType")


class RunEventType(enum.StrEnum):
    """What an event carries."""

    REASONING = "reasoning"
    OUTPUT_TEXT = "output_text"
    TOOL_CALL = "tool_call"
    TOOL_CALL_RESULT = "tool_call_result"
    ERROR = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvent:
    """One event of a run."""

    type: RunEventType
    """The kind of content."""
    role: str
    """``assistant`` (the model) or ``tool`` (an action's result)."""
    is_type_switched: bool
    """True on the first event of a new type; always true for tool calls and results."""
    content: Any
    """Text for reasoning, output_text and error; a dict for tool calls and results."""
    context_id: str = ""
    """The context instance of the run."""
    output_type: str | None = None
    """For output_text: the output's type (``telegram:message``)."""
    output_index: int | None = None
    """For output_text: which element of the step's response the text belongs to."""
    step: int = 0
    """The step of the run (1-based)."""
    final: bool = False
    """For output_text: true on the event that closes the output (its content is then the whole text)."""


Listener = Callable[[RunEvent], Any]


class EventEmitter:
    """Builds events with ``is_type_switched`` and hands them to listeners (synchronously)."""

    __slots__ = ("_last", "context_id", "listeners", "step")

    def __init__(self, context_id: str) -> None:
        self.context_id = context_id
        self.listeners: list[Listener] = []
        self.step = 0
        self._last: RunEventType | None = None

    def emit(
        self,
        type: RunEventType,
        content: Any,
        *,
        output_type: str | None = None,
        output_index: int | None = None,
        final: bool = False,
    ) -> None:
        """Send an event to every listener; does nothing when nobody listens."""
        if not self.listeners:
            self._last = type
            return
        switched = type != self._last or type in (RunEventType.TOOL_CALL, RunEventType.TOOL_CALL_RESULT)
        if type == RunEventType.OUTPUT_TEXT and final:
            switched = False
        self._last = type
        event = RunEvent(
            type=type,
            role="tool" if type == RunEventType.TOOL_CALL_RESULT else "assistant",
            is_type_switched=switched,
            content=content,
            context_id=self.context_id,
            output_type=output_type,
            output_index=output_index,
            step=self.step,
            final=final,
        )
        for listener in list(self.listeners):
            listener(event)
