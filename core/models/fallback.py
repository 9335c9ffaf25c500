"""A chain of models answering as one (``LLM_FALLBACKS``): the first healthy model answers; on a transient failure
before its first chunk (a timeout, a 429, a 5xx, a refused connection) the next one answers the same request.

A model that fails after its first chunk is not replaced: what it wrote has been shown, and another model's
answer would show it twice, so its ``ModelError`` ends the step as it does with one model (the run fails and
says so). A model that keeps failing is paused by its circuit breaker (``breaker.py``) instead of costing every
call a timeout. Which model answered, and which failed or were skipped on the way, is written to ``call_route``
for usage, metrics and traces.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence

from ..errors import ModelError
from .base import (
    Model,
    ModelRequest,
    ModelRoute,
    ModelUsage,
    Preloads,
    call_route,
    call_usage,
    closing_stream,
    without_images,
)
from .breaker import BreakerPolicy, CircuitBreaker

__all__ = ("FallbackModel",)

log = logging.getLogger(__name__)

_NO_IMAGES = "the image could not be shown: the model answering now does not see images"


class FallbackModel:
    """Streams from the first model of ``models`` its breaker lets through, handing the request to the next on a
    transient failure before the first chunk. It is a ``Model``: ``name``, ``model``, ``vision`` (and the compact
    prompt's ``prefers_compact`` and ``calls_tools``) are the first model's, which requests are written for."""

    def __init__(
        self,
        models: Sequence[Model],
        *,
        breaker: BreakerPolicy | None = None,
        timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not models:
            raise ValueError("FallbackModel needs at least one model")
        self.models: tuple[Model, ...] = tuple(models)
        """The chain, in the order models are asked."""
        policy = breaker or BreakerPolicy()
        self.breakers: tuple[CircuitBreaker, ...] = tuple(CircuitBreaker(policy, clock=clock) for _ in self.models)
        """One circuit breaker per model, in the same order."""
        self.timeout = timeout
        """Seconds each model has to send its first chunk before the next one is asked (``LLM_TIMEOUT``; None:
        the models' own timeouts). The agent's ``model_idle_timeout`` must leave room for every model to use it
        (``bots`` gives it ``LLM_TIMEOUT`` per model of the chain), or the run's own deadline ends the call first."""
        first = self.models[0]
        self.name: str = first.name
        self.model: str = first.model
        self.vision: bool = first.vision
        self.prefers_compact: bool = bool(getattr(first, "prefers_compact", False))
        """The first model's: prompts are written for it."""
        self.calls_tools: bool = bool(getattr(first, "calls_tools", False))
        """The first model's: tools in its own format are offered only when it writes them."""
        self.last_usage: ModelUsage | None = None
        """The usage of the last call that reported it, whichever model answered."""

    def __repr__(self) -> str:
        return f"FallbackModel([{', '.join(m.name for m in self.models)}])"

    async def load(self) -> None:
        """Get every model of the chain ready (the embedded one loads its weights), so a failover waits for
        nothing."""
        for member in self.models:
            load = getattr(member, "load", None)
            if load is not None:
                result = load()
                if inspect.isawaitable(result):
                    await result

    async def aclose(self) -> None:
        """Release what each model holds (HTTP connections, the embedded model's weights)."""
        for member in self.models:
            close = getattr(member, "aclose", None) or getattr(member, "close", None)
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result

    async def stream(self, request: ModelRequest) -> AsyncGenerator[str, None]:
        """Stream the answer of the first model that gives one; ``ModelError`` when none does, or when the
        answering model fails half-way."""
        route = ModelRoute()
        call_route.set(route)
        errors: list[ModelError] = []
        for index, (member, breaker) in enumerate(zip(self.models, self.breakers, strict=True)):
            if not breaker.allows():
                route.skipped.append(member.model or member.name)
                continue
            asked = self._request_for(index, member, request)
            usage_before = member.last_usage
            call_usage.set(None)
            started = False
            outcome = _Outcome.NONE
            try:
                if isinstance(member, Preloads):  # (its SDK loaded before the first chunk's deadline starts)
                    await member.connect()
                async with closing_stream(member.stream(asked)) as chunks:
                    it = aiter(chunks)
                    first = await self._first_chunk(it, member)
                    started = True
                    route.answered = asked.model or member.model or member.name
                    route.provider = member.name.partition(":")[0]
                    if first is not None:
                        yield first
                        async for chunk in it:
                            yield chunk
                self._count_usage(member, usage_before)
                outcome = _Outcome.ANSWERED
                return
            except ModelError as exc:
                if not exc.transient:
                    raise
                outcome = _Outcome.FAILED
                route.failed.append((member.model or member.name, str(exc)))
                if started:  # the answer is on its way: another model's would show it twice
                    raise
                log.warning("%s failed before answering: %s; the next model of the chain is asked", member.name, exc)
                errors.append(exc)
            except GeneratorExit:  # the reader had enough (a turn it cut off): the model was answering
                if started:
                    outcome = _Outcome.ANSWERED
                raise
            finally:
                _settle(member, breaker, outcome)
        if len(errors) == 1 and not route.skipped:
            raise errors[0]
        raise self._none_answered(route, bool(errors)) from (errors[-1] if errors else None)

    def _count_usage(self, member: Model, before: ModelUsage | None) -> None:
        """The answering model's usage for the step loop: reported in this task, or (a provider that only sets
        ``last_usage``) taken from it when it changed."""
        usage = call_usage.get()
        if usage is None and member.last_usage is not before and member.last_usage is not None:
            usage = member.last_usage
            call_usage.set(usage)
        if usage is not None:
            self.last_usage = usage

    def _request_for(self, index: int, member: Model, request: ModelRequest) -> ModelRequest:
        """``request`` as the ``index``-th model is asked: a conversation's ``/model`` names a model of the first
        one's provider, and a model that sees no images reads a note instead."""
        if index == 0:
            return request
        if request.model is not None:
            request = dataclasses.replace(request, model=None)
        if request.images and not member.vision:
            request = without_images(request, _NO_IMAGES)
        return request

    async def _first_chunk(self, chunks: AsyncIterator[str], member: Model) -> str | None:
        """The first chunk of ``member``'s answer (None: it answered nothing), within ``timeout``."""
        try:
            if self.timeout is None:
                return await anext(chunks)
            async with asyncio.timeout(self.timeout):
                return await anext(chunks)
        except StopAsyncIteration:
            return None
        except TimeoutError as exc:
            raise ModelError(
                f"{member.name} sent nothing within {self.timeout:g}s: raise LLM_TIMEOUT or check the model server",
                transient=True,
            ) from exc

    def _none_answered(self, route: ModelRoute, tried: bool) -> ModelError:
        paused = f"paused after repeated failures (LLM_BREAKER_FAILURES): {', '.join(route.skipped)}"
        if not tried:
            wait = min(b.reopens_in() for b in self.breakers)
            return ModelError(
                f"every model of the chain is {paused}; the first is tried again in {wait:.0f}s", transient=True
            )
        failures = "; ".join(f"{name}: {error}" for name, error in route.failed)
        return ModelError(
            f"no model of the chain answered: {failures}{'; ' + paused if route.skipped else ''}", transient=True
        )


class _Outcome(enum.Enum):
    """What a call tells a model's breaker."""

    NONE = enum.auto()
    """Nothing (cancelled, or a failure that says nothing of the model's health): a trial slot is given back."""
    ANSWERED = enum.auto()
    FAILED = enum.auto()


def _settle(member: Model, breaker: CircuitBreaker, outcome: _Outcome) -> None:
    if outcome is _Outcome.ANSWERED:
        breaker.succeeded()
    elif outcome is _Outcome.FAILED:
        if breaker.failed():
            log.warning(
                "%s keeps failing: it is skipped for %gs (LLM_BREAKER_PAUSE)", member.name, breaker.policy.pause
            )
    else:
        breaker.released()
