"""Helpers of the operations tests: a small agent with the terminal chat extension and a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from core import Agent, ModelRequest, ModelUsage, ScriptedModel, create_agent
from extensions.terminal import cli_extension
from tests.agent_args import agent_args

__all__ = ("REPLY", "CountingModel", "make_agent", "sample")

REPLY = '<response><output type="cli:message">Hi there</output></response>'


class CountingModel(ScriptedModel):
    """A scripted model that reports token usage the way the real providers do (``last_usage``)."""

    def __init__(self, replies: Any, *, usage: tuple[int, int] = (120, 8)) -> None:
        super().__init__(replies)
        self.usage = usage
        self.last_usage: ModelUsage | None = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:  # type: ignore[override]
        async for chunk in super().stream(request):
            yield chunk
        self.last_usage = ModelUsage(input_tokens=self.usage[0], output_tokens=self.usage[1])


def make_agent(model: Any = None, **options: Any) -> Agent:
    return create_agent(
        **agent_args(
            model=model if model is not None else ScriptedModel([REPLY], repeat_last=True),
            extensions=[cli_extension()],
            **options,
        )
    )


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    """The current value of a sample in the default registry (0 when absent)."""
    from prometheus_client import REGISTRY

    value = REGISTRY.get_sample_value(name, labels or {})
    return 0.0 if value is None else value
