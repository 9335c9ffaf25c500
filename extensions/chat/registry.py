"""Which platform runtime serves which agent: both adapters keep one, weakly, per agent."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Generic, TypeVar

from core.errors import ConfigError

if TYPE_CHECKING:
    from core import Host

__all__ = ("RuntimeRegistry",)

R = TypeVar("R")


class RuntimeRegistry(Generic[R]):
    """Maps an agent to its platform runtime without keeping the agent alive."""

    def __init__(self, *, platform: str, extension: str) -> None:
        self._platform = platform
        self._extension = extension
        self._runtimes: weakref.WeakKeyDictionary[Host, R] = weakref.WeakKeyDictionary()

    def bind(self, agent: Host, runtime: R) -> None:
        """Make ``runtime`` the platform side of ``agent`` (the extension's install hook does this)."""
        self._runtimes[agent] = runtime

    def find(self, agent: Host) -> R | None:
        """The runtime of ``agent``, or None."""
        return self._runtimes.get(agent)

    def get(self, agent: Host) -> R:
        """The runtime of ``agent``; a ``ConfigError`` when the agent was built without the extension."""
        runtime = self._runtimes.get(agent)
        if runtime is None:
            raise ConfigError(
                f"the agent has no {self._platform} runtime: build it with "
                f"create_agent(extensions=[{self._extension}(settings)]) and call await agent.start() first"
            )
        return runtime
