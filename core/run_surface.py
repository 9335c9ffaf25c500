"""What a run's collaborators (``core.action_calls``, ``core.delivery``) use of the run: its state, what it reads
from the agent, its log and events, and its guards. ``core.engine.Run`` is one; they never import it back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .entries import Log
    from .events import EventEmitter
    from .handler_context import ContextState
    from .plugin import PluginHooks
    from .run_deps import RunDeps

__all__ = ("RunSurface",)


class RunSurface(Protocol):
    """A run, as the modules that act for it see it."""

    @property
    def deps(self) -> RunDeps:
        """What the run needs from the agent."""
        ...

    @property
    def state(self) -> ContextState[Any]:
        """The context instance the run is for."""
        ...

    @property
    def steps(self) -> int:
        """Model calls made so far."""
        ...

    @property
    def emitter(self) -> EventEmitter:
        """Where the run's events go."""
        ...

    @property
    def hooks(self) -> PluginHooks:
        """The plugins' hooks in this run."""
        ...

    def record(self, entry: Log) -> None:
        """Add an entry the run produced to working memory and the chain."""
        ...

    def error(self, message: str, *, source: str) -> None:
        """Record an error the model reads in the next step."""
        ...

    def delivered(self, output_type: str) -> None:
        """An output was delivered."""
        ...
