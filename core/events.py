"""Typed run events (seed: Ailoy Agent Response Format): a run as a stream a UI can render as it happens.

Every event has a ``type``, a ``role`` and ``is_type_switched``; its ``content`` depends on the type:

=====================  =========  ==========================================================================
type                   role       content
=====================  =========  ==========================================================================
``reasoning``          assistant  ``str``: a piece of the model's reasoning (its ``<reasoning>``, or the
                                  reasoning a provider returns apart: OpenAI-compatible ``reasoning_content``,
                                  Anthropic thinking blocks)
``output_text``        assistant  ``str``: a piece of an output's text (a *delta*); the pieces of an output,
                                  joined, are its text as streamed, once
``output_text_done``   assistant  ``str``: closes an output: the whole text as delivered, or ``""`` when it
                                  was not delivered, with ``error`` saying why (not part of the Ailoy format:
                                  a consumer that only knows its five types skips it)
``tool_call``          assistant  ``dict``: ``{"id", "name", "arguments"}`` (the arguments as the model wrote
                                  them)
``tool_call_result``   tool       ``dict``: ``{"id", "name", "result"}`` or ``{"id", "name", "error"}``; one
                                  for every ``tool_call``: for a fire-and-forget call, as it is handed to the
                                  task runner, ``{"id", "name", "result": None, "background": True}``
``error``              assistant  ``str``: why the run failed; nothing follows it
=====================  =========  ==========================================================================

``is_type_switched`` is the Ailoy format's, to the letter: true on the first event of a new type (so on the first
piece of an output after another output's ``output_text_done``). ``new_item`` is true where a UI that gives each
item a box of its own opens one: the first event of each new output, and every tool call and tool result;
``Agent.stream(..., switched="item")`` hands it out as ``is_type_switched``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ("NOT_DELIVERED", "EventEmitter", "RunEvent", "RunEventType")

NOT_DELIVERED = "the output was not delivered"
"""The ``error`` of an ``output_text_done`` event when no reason was given."""


class RunEventType(enum.StrEnum):
    """What an event carries."""

    REASONING = "reasoning"
    OUTPUT_TEXT = "output_text"
    OUTPUT_TEXT_DONE = "output_text_done"
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
    """True on the first event of a new type (the Ailoy format's "first message of a new type")."""
    content: Any
    """Text for reasoning, output_text, output_text_done and error; a dict for tool calls and results (see the
    module docstring)."""
    context_id: str = ""
    """The context instance of the run."""
    output_type: str | None = None
    """For output_text and output_text_done: the output's type (``telegram:message``)."""
    output_index: int | None = None
    """For output_text and output_text_done: which element of the step's response the text belongs to."""
    step: int = 0
    """The step of the run (1-based)."""
    error: str | None = None
    """For output_text_done: why the output was not delivered (its content is then ``""``)."""
    new_item: bool = False
    """True on the first event of each new output and on every tool call and result: where a UI that shows each
    item in a box of its own opens one."""

    @property
    def final(self) -> bool:
        """True for the event that closes an output (``output_text_done``)."""
        return self.type is RunEventType.OUTPUT_TEXT_DONE


Listener = Callable[[RunEvent], Any]


class EventEmitter:
    """Builds events with ``is_type_switched`` and ``new_item`` and hands them to listeners (synchronously)."""

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
        error: str | None = None,
    ) -> None:
        """Send an event to every listener; does nothing when nobody listens.

        An ``output_text_done`` whose ``content`` is None (or that has an ``error``) is an output that was not
        delivered: its content becomes ``""`` and its ``error`` says why."""
        last, self._last = self._last, type
        if type is RunEventType.OUTPUT_TEXT:
            output = (self.step, output_index)
            last_output, self._last_output = self._last_output, output
            if not self.listeners:  # what came last is kept all the same: a listener may join the run
                return
            new_item = type is not last or output != last_output
        else:
            self._last_output = None
            if not self.listeners:
                return
            if type is RunEventType.OUTPUT_TEXT_DONE:
                new_item = False
                if content is None or error is not None:
                    content, error = "", error or NOT_DELIVERED
                elif not isinstance(content, str):
                    content = str(content)
            else:
                new_item = type is not last or type in (RunEventType.TOOL_CALL, RunEventType.TOOL_CALL_RESULT)
        event = RunEvent(
            type=type,
            role="tool" if type is RunEventType.TOOL_CALL_RESULT else "assistant",
            is_type_switched=type is not last,
            content=content,
            context_id=self.context_id,
            output_type=output_type,
            output_index=output_index,
            step=self.step,
            error=error if type is RunEventType.OUTPUT_TEXT_DONE else None,
            new_item=new_item,
        )
        for listener in list(self.listeners):
            listener(event)
