"""What the step loop needs from the agent, handed to each run as one object (``Agent.run_deps``).

A run reads only this: the model and its limits, the prompt's parts, the definitions offered in a context, the
plugins, the observers, and the host handlers receive. The agent builds it once and builds it again when the model
changes (``agent.model = ...`` applies to the next run); runs only read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .definition_types import Host
    from .definitions import Action, ContextState, Output
    from .models.base import Model
    from .plugin import Plugin
    from .prompt import PromptTemplate
    from .task_runner import TaskRunner

__all__ = ("RunDeps",)


@dataclass(kw_only=True, slots=True)
class RunDeps:
    """The agent as one run of the step loop sees it."""

    host: Host
    """The agent as handlers and context hooks receive it (their last argument)."""
    model: Model
    """The model the run calls."""
    max_tokens: int
    """Upper bound on tokens per model call."""
    model_idle_timeout: float
    """Seconds the model may stay silent before the call fails."""
    output_timeout: float
    """Seconds an output handler may take."""
    prompt: PromptTemplate
    """The prompt's sections and how they are arranged."""
    persona: str
    """Who the bot is (a conversation's ``/persona`` replaces it)."""
    compact_prompt: bool
    """Use the short prompt made for small local models."""
    instructions: str
    """The bot's own instructions (``Bot.instructions``): the compact prompt shows them (the full prompt has them in
    ``prompt``, after the protocol's)."""
    calls_tools: bool
    """With the compact prompt, offer the actions as tools in the model's own format (``CallsTools``)."""
    sees_images: bool
    """The model is shown the images the prompt refers to."""
    max_batch: int
    """Inputs one run answers at most (0: no cap)."""
    tasks: TaskRunner
    """Where action handlers run."""
    available: Callable[[ContextState], tuple[list[Action], list[Output]]]
    """The actions and outputs offered in a context instance, asked at each step."""
    observe: Callable[[str, str, float], None]
    """``observe(kind, context_id, value)``: report a measure to the observers (one that raises is logged)."""
    observe_model: Callable[[str, float], None]
    """``observe_model(context_id, seconds)``: report a model call's duration."""
    observe_output: Callable[[str, str], None]
    """``observe_output(context_id, output_type)``: report a delivered output."""
    plugins: tuple[Plugin, ...] = ()
    """The agent's plugins: each may take part in a run (``core.plugin``)."""
