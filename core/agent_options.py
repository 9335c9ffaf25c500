"""How an agent runs, apart from what it is made of: the prompt's sections, the model's budgets and deadlines,
the task queues, how long stopping may take and the chat settings' rules
(``create_agent(options=AgentOptions(...))``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from .busy import BusyPolicy
from .prompt import DEFAULT_INTRO, FOOTER, INSTRUCTIONS, RESPONSE_FORMAT, TEMPLATE

if TYPE_CHECKING:
    from .chat_settings import ChatPolicy

__all__ = ("AgentOptionFields", "AgentOptions")


@dataclass(kw_only=True)
class AgentOptions:
    """Everything about how an agent runs that has a default."""

    persona: str = ""
    """Who the bot is, in the system prompt (a conversation's ``/persona`` replaces it)."""
    intro: str = DEFAULT_INTRO
    """The prompt's first section."""
    instructions: str = INSTRUCTIONS
    """The protocol's instructions (a ``Bot``'s own instructions follow them)."""
    response: str = RESPONSE_FORMAT
    """How the model must answer."""
    footer: str = FOOTER
    """The prompt's last section."""
    template: str = TEMPLATE
    """Where the sections go (``core.prompt.PromptTemplate``)."""
    compact_prompt: bool | None = None
    """Use the short prompt made for small local models; None: when the model prefers it (the embedded model)."""
    max_tokens: int = 1024
    """Upper bound on tokens per model call."""
    model_idle_timeout: float = 60.0
    """Seconds the model may stay silent before the call fails."""
    output_timeout: float = 60.0
    """Seconds an output handler may take."""
    queues: Mapping[str, int] = field(default_factory=dict)
    """Task-runner queues and their concurrency (actions name theirs with ``queue=``)."""
    stop_timeout: float = 10.0
    """Seconds ``stop()`` waits for running runs, then for fire-and-forget calls, before cancelling them."""
    max_batch: int = 0
    """Inputs one run answers at most (0: no cap): the rest of a burst waits for the next run, so no model request
    carries a thousand messages (``REDIS_BATCH_SIZE`` in the bot, the same cap as a fleet's batches)."""
    busy: BusyPolicy = BusyPolicy.STEER
    """What a message sent while its conversation's run goes on does: ``steer``, ``collect``, ``queue`` or
    ``interrupt`` (``core.busy``; ``BOT_BUSY`` in the bot)."""
    quiet_ms: int = 0
    """Milliseconds a conversation must stay quiet before its run starts, so a burst of messages is one turn (0: at
    once; ``BOT_QUIET_MS`` in the bot; a fleet waits in Redis, ``QueueConfig.quiet_ms``). A conversation may choose
    its own (``/quiet``, ``ChatSettings.quiet``)."""
    quiet_ms_by_context: dict[str, int] = field(default_factory=dict)
    """The quiet window of the conversations of some context types, instead of ``quiet_ms`` (the bot gives the
    terminal's ``cli:session`` 0: a person at a terminal sends one line at a time and waits for its answer)."""
    state_cache: int = 1024
    """Working memories kept loaded between runs (in one process)."""
    chat_policy: ChatPolicy | None = None
    """The operator's rules for settings changed from the chat (allowed models, pins, admins); None: no rules."""


class AgentOptionFields(TypedDict, total=False):
    """``AgentOptions``' fields as keyword arguments (``bots.app.build_agent(**options)``), so a misspelt one is an
    error for the type checker too; a test keeps the two alike."""

    persona: str
    intro: str
    instructions: str
    response: str
    footer: str
    template: str
    compact_prompt: bool | None
    max_tokens: int
    model_idle_timeout: float
    output_timeout: float
    queues: Mapping[str, int]
    stop_timeout: float
    max_batch: int
    busy: BusyPolicy
    quiet_ms: int
    quiet_ms_by_context: dict[str, int]
    state_cache: int
    chat_policy: ChatPolicy | None
