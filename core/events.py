"""Typed run events (seed: Ailoy Agent Response Format): a run as a stream a UI can render as it happens.

Every event has a ``type``, a ``role`` and ``is_type_switched``; its ``content`` depends on the type:

=====================  =========  ==========================================================================
type                   role       content
=====================  =========  ==========================================================================
``reasoning``          assistant  ``str``: a piece of the model's reasoning
``output_text``        assistant  ``str``: a piece of an output's text (a *delta*); on the output's last event
                                  (``final=True``) the whole text as delivered, or ``""`` when it was not
                                  delivered, with ``error`` saying why
``tool_call``          assistant  ``dict``: ``{"id", "name", "arguments"}`` (the arguments as the model wrote
                                  them)
``tool_call_result``   tool       ``dict``: ``{"id", "name", "result"}`` or ``{"id", "name", "error"}``
``error``              assistant  ``str``: why the run failed; nothing follows it
=====================  =========  ==========================================================================

``is_type_switched`` is true on the first event of a new type, on the first event of each new output (a
second ``<output>`` right after another one starts a new message box too), and on every tool call and tool
result (each is a box of its own). The final ``output_text`` event closes its output and is never switched.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ("NOT_DELIVERED", "EventEmitter", "RunEvent", "RunEventType")

NOT_DELIVERED = "the output was not delivered"
"""The ``error`` of a final ``output_text`` event when no reason was given."""


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
    """True on the first event of a new type or of a new output; always true for tool calls and results."""
    content: Any
    """Text for reasoning, output_text and error; a dict for tool calls and results (see the module docstring)."""
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
    error: str | None = None
    """For a final output_text: why the output was not delivered (its content is then ``""``)."""


Listener = Callable[[RunEvent], Any]


class EventEmitter:
    """Builds events with ``is_type_switched`` and hands them to listeners (synchronously)."""

    __slots__ = ("_last", "_last_output", "context_id", "listeners", "step")

    def __init__(self, context_id: str) -> None:
        self.context_id = context_id
        self.listeners: list[Listener] = []
        self.step = 0
        self._last: RunEventType | None = None
        self._last_output: tuple[int, int | None] | None = None

    def emit(
        self,
        type: RunEventType,
        content: Any,
        *,
        output_type: str | None = None,
        output_index: int | None = None,
        final: bool = False,
        error: str | None = None,
    ) -> None:
        """Send an event to every listener; does nothing when nobody listens.

        A final ``output_text`` whose ``content`` is None (or that has an ``error``) is an output that was not
        delivered: its content becomes ``""`` and its ``error`` says why."""
        last, self._last = self._last, type
        if type == RunEventType.OUTPUT_TEXT:
            output = (self.step, output_index)
            last_output, self._last_output = self._last_output, output
            if not self.listeners:  # what came last is kept all the same: a listener may join the run
                return
            switched = not final and (type != last or output != last_output)
            if final:
                if content is None or error is not None:
                    content, error = "", error or NOT_DELIVERED
                elif not isinstance(content, str):
                    content = str(content)
        else:
            self._last_output = None
            if not self.listeners:
                return
            switched = type != last or type in (RunEventType.TOOL_CALL, RunEventType.TOOL_CALL_RESULT)
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
            error=error if type == RunEventType.OUTPUT_TEXT and final else None,
        )
        for listener in list(self.listeners):
            listener(event)
