"""The model protocol: anything that streams text for a prompt."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ("Model", "ModelRequest", "ModelUsage")


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One call of the model."""

    system: str
    """The system part of the prompt (persona, rules, the response format)."""
    prompt: str
    """The user part of the prompt (available tools, contexts, working memory, updates)."""
    max_tokens: int = 1024
    """Upper bound on generated tokens."""
    stop: tuple[str, ...] = ("</response>",)
    """Generation stops at any of these strings."""
    output_types: tuple[str, ...] = ()
    """The output types the model may use (a constrained decoder builds its grammar from them)."""
    action_names: tuple[str, ...] = ()
    """The action names the model may call."""
    max_items: int | None = None
    """At most this many outputs and action calls, for a constrained decoder (None: its default)."""
    metadata: dict[str, str] = field(default_factory=dict)
    """Correlation data (context id) for logs."""


@dataclass(kw_only=True)
class ModelUsage:
    """Token counts of one call, when the provider reports them."""

    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Generated tokens."""


@runtime_checkable
class Model(Protocol):
    """A text generator. ``stream`` yields chunks of the answer as they are produced.

    Implementations raise ``ModelError`` (or ``ModelAuthError``) for failures, never a library's own
    exception type.
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Stream the answer to ``request``."""
        ...
