"""What one step of a run has seen so far: the response's calls, its outputs still streaming, what it made."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .dataflow import ResponseCalls

if TYPE_CHECKING:
    from .definitions import Action, Output
    from .entries import OutputRef
    from .templates import TemplateStream
    from .turns import TurnGuard

__all__ = ("OpenOutput", "Step")


class OpenOutput:
    """An output whose tag has opened and not closed yet."""

    __slots__ = ("checked", "held", "ref", "templates", "turns")

    def __init__(self, ref: OutputRef, *, turns: TurnGuard | None) -> None:
        self.ref = ref
        """Its log entry, in working memory from the moment the tag opens (the seed's ``getOrCreateRef``)."""
        self.turns = turns
        """Ends it where the model starts to invent a turn (the compact prompt of small models)."""
        self.templates: TemplateStream | None = None
        """Resolves the ``{{...}}`` of its deltas, made at the first brace."""
        self.held: list[str] = []
        """Deltas held back while the text could still be a reply already delivered (the loop guard)."""
        self.checked = False
        """True once its text differs from every reply delivered before: nothing more is held."""


class Step:
    """What one step has seen so far."""

    __slots__ = (
        "actions",
        "calls",
        "guarded",
        "open",
        "outputs",
        "produced",
        "repeats",
        "speakers",
        "stray_text",
        "tasks",
    )

    def __init__(
        self,
        actions: dict[str, Action],
        outputs: dict[str, Output],
        tasks: asyncio.TaskGroup,
        *,
        guarded: bool = False,
        speakers: tuple[str, ...] = (),
    ) -> None:
        self.actions = actions
        """The actions offered in this step, by name."""
        self.outputs = outputs
        """The outputs offered in this step, by type."""
        self.tasks = tasks
        """Owns the calls the step waits for."""
        self.guarded = guarded
        """Outputs end where the model starts to invent a turn (the compact prompt of small models)."""
        self.speakers = speakers
        """The names of the people in the compact prompt's conversation."""
        self.calls = ResponseCalls()
        """The calls of the response as the model writes them; closed once it has ended."""
        self.open: dict[int, OpenOutput] = {}
        """The outputs streaming now, by element index."""
        self.produced = 0
        """Calls and outputs the model wrote in this step."""
        self.repeats = 0
        """Of those, the ones the loop guard refused as repeats."""
        self.stray_text: list[str] = []
        """Text the model wrote outside of any tag."""

    @property
    def added_nothing(self) -> bool:
        """True when the model wrote calls or outputs and every one was a repeat."""
        return self.repeats > 0 and self.repeats == self.produced
