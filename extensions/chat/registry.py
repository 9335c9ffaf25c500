"""Which platform runtime serves which agent: each adapter keeps its runtime in the agent it serves, under a typed
slot (``core.slots.Slot``; ``Host.provide``), so nothing global holds an agent or its runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

from core.errors import ConfigError
from core.slots import Slot

if TYPE_CHECKING:
    from core import Host, Setup

__all__ = ("RuntimeRegistry",)

R = TypeVar("R")


class RuntimeRegistry(Generic[R]):
    """The slot of one platform's runtime in the agents it serves, and the error when an agent has none."""

    def __init__(self, *, platform: str, extension: str) -> None:
        self._platform = platform
        self._extension = extension
        self.slot: Slot[R] = Slot(f"{platform} runtime")
        """Where an agent keeps this platform's runtime."""

    def bind(self, agent: Setup, runtime: R) -> None:
        """Make ``runtime`` the platform side of ``agent`` (the extension's install hook does this)."""
        agent.provide(self.slot, runtime)

    def find(self, agent: Host) -> R | None:
        """The runtime of ``agent``, or None."""
        return agent.provided(self.slot)

    def get(self, agent: Host) -> R:
        """The runtime of ``agent``; a ``ConfigError`` when the agent was built without the extension."""
        runtime = agent.provided(self.slot)
        if runtime is None:
            raise ConfigError(
                f"the agent has no {self._platform} runtime: build it with "
                f"create_agent(extensions=[{self._extension}(settings)]) and call await agent.start() first"
            )
        return runtime
