"""One model call of a run: the request's stream with a deadline on each chunk, the tokens it cost counted to
whoever asked, and the plain-text answer of a small model read as a response."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from . import tracing
from .errors import ModelError, RunError
from .media.attachment import image_marker, loaded_of
from .models.base import ImagePart, ModelRequest, ModelRoute, call_reasoning, call_route, call_usage
from .prompt import xml_attr
from .turns import TurnGuard
from .unicode_text import repair_text

if TYPE_CHECKING:
    from .definitions import ContextState
    from .run_deps import RunDeps

__all__ = ("Charge", "as_response", "images_in", "model_name", "stream_model")

log = logging.getLogger("core.engine")

Charge = Callable[[int, int, bool, int], Awaitable[None]]
"""``charge(input_tokens, output_tokens, estimated, cached_input_tokens)``: count what a call cost, once its stream
has ended (``cached_input_tokens``: of the input tokens, those the provider read from its prompt cache)."""


async def stream_model(
    deps: RunDeps, request: ModelRequest, *, charge: Charge, reasoning: Callable[[str], None] | None = None
) -> AsyncGenerator[str, None]:
    """The model's chunks, with a deadline on each; library errors become ``ModelError``. When the stream
    ends, its tokens go to ``charge`` (as the provider reported them, else estimated from the text). The reasoning
    the provider returns apart from the answer (``report_reasoning``) goes to ``reasoning``, and keeps the deadline
    off while it streams."""
    idle = deps.model_idle_timeout
    model = deps.model
    usage_before = model.last_usage
    call_usage.set(None)
    call_route.set(None)  # a chain of models (FallbackModel) says here which of them answered
    span = tracing.start(f"chat {model_name(deps, request)}", kind="client") if tracing.active() else tracing.NO_SPAN
    recording = span.is_recording()
    if recording:
        _request_attributes(span, deps, request)
    started = time.perf_counter()
    stream = model.stream(request)
    it = aiter(stream)
    written = 0
    captured: list[str] | None = [] if recording and tracing.capture_content() else None
    loop = asyncio.get_running_loop()
    watch = _IdleWatch(idle)

    def heard(text: str) -> None:
        if watch.since is not None:
            watch.since = loop.time()  # the model is thinking, not silent
        if reasoning is not None:
            reasoning(text)

    call_reasoning.set(heard)
    try:
        while True:
            watch.since = loop.time()
            try:
                chunk = await anext(it)
            except StopAsyncIteration:
                usage = call_usage.get()  # reported by the provider as its stream ended, in this task
                if usage is None:  # a provider that only sets ``last_usage`` (shared by concurrent runs)
                    usage = model.last_usage
                    usage = None if usage is usage_before else usage
                if usage is not None:
                    tokens = (usage.input_tokens, usage.output_tokens)
                    if usage.cached_input_tokens:  # (the prompt's prefix the provider's cache read)
                        deps.observe(
                            f"cached_input_tokens:{model_name(deps, request)}",
                            str(request.metadata.get("context_id", "")),
                            usage.cached_input_tokens,
                        )
                    await charge(usage.input_tokens, usage.output_tokens, False, usage.cached_input_tokens)
                else:  # the provider does not say: about 4 characters a token, for the limits and /stats
                    tokens = ((len(request.system) + len(request.prompt)) // 4, written // 4)
                    await charge(tokens[0], tokens[1], True, 0)
                if recording:
                    span.set_attributes(
                        {
                            "gen_ai.usage.input_tokens": tokens[0],
                            "gen_ai.usage.output_tokens": tokens[1],
                            "gen_ai.usage.estimated": usage is None,
                            "gen_ai.response.finish_reasons": ["length" if tokens[1] >= request.max_tokens else "stop"],
                        }
                    )
                return
            except (TimeoutError, asyncio.CancelledError) as exc:
                if isinstance(exc, asyncio.CancelledError) and not watch.timed_out():
                    raise
                span.set_attribute("error.type", "timeout")
                raise ModelError(
                    f"the model sent nothing for {idle:g}s; check the model server or raise LLM_TIMEOUT"
                ) from exc
            except RunError:
                raise
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__name__)
                raise ModelError(f"model {model.name!r} failed: {type(exc).__name__}: {exc}") from exc
            watch.since = None
            if recording and not written:
                span.set_attribute("gen_ai.response.time_to_first_token", time.perf_counter() - started)
                span.add_event("gen_ai.first_token")
            chunk = repair_text(chunk)  # a provider may decode a JSON escape into a lone surrogate
            written += len(chunk)
            if captured is not None:
                captured.append(chunk)
            yield chunk
    finally:
        watch.close()
        call_reasoning.set(None)
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()
        route = call_route.get()
        if route is not None:
            _observe_route(deps, request, route, span)
        if captured is not None:
            span.set_attribute("gen_ai.output.messages", "".join(captured))
        if span is not tracing.NO_SPAN:
            span.end()


class _IdleWatch:
    """The idle deadline of one model stream: the task is cancelled once it has waited ``idle`` seconds for a chunk
    (``since``: when the wait began, None while the caller handles a chunk). One timer for the whole stream, re-armed
    only when it fires: an ``asyncio.timeout`` per chunk costs a timer and a context manager each time."""

    __slots__ = ("_cancelling", "_handle", "_loop", "_task", "expired", "idle", "since")

    def __init__(self, idle: float) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a model stream is read inside a task")
        self._task = task
        self._loop = asyncio.get_running_loop()
        self._cancelling = 0
        self.idle = idle
        self.since: float | None = None
        self.expired = False
        self._handle = self._loop.call_at(self._loop.time() + idle, self._fire)

    def _fire(self) -> None:
        now, since = self._loop.time(), self.since
        if since is not None and now >= since + self.idle:
            self.expired = True
            self._cancelling = self._task.cancelling()
            self._task.cancel()
        else:  # not waiting, or not for long enough: look again when the current wait would be too long
            self._handle = self._loop.call_at((now if since is None else since) + self.idle, self._fire)

    def timed_out(self) -> bool:
        """Whether a cancellation is the deadline's own (as ``asyncio.timeout`` tells; nobody else cancelled)."""
        return self.expired and self._task.uncancel() <= self._cancelling

    def close(self) -> None:
        self._handle.cancel()


def _request_attributes(span: tracing.SpanLike, deps: RunDeps, request: ModelRequest) -> None:
    name = model_name(deps, request)
    system = deps.model.name.partition(":")[0]
    span.set_attributes(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": system,
            "gen_ai.provider.name": system,
            "gen_ai.request.model": deps.model.model or deps.model.name,
            "gen_ai.response.model": name,
            "gen_ai.request.max_tokens": request.max_tokens,
        }
    )
    if tracing.capture_content():
        span.set_attribute("gen_ai.system_instructions", request.system)
        span.set_attribute("gen_ai.input.messages", request.prompt)


def model_name(deps: RunDeps, request: ModelRequest) -> str:
    """The name of the model ``request`` is answered by: the one of a chain that answered (``call_route``, set
    once its first chunk came), else a conversation's ``/model`` or the configured one."""
    route = call_route.get()
    if route is not None and route.answered:
        return route.answered
    return request.model or deps.model.model or deps.model.name


def _observe_route(deps: RunDeps, request: ModelRequest, route: ModelRoute, span: tracing.SpanLike) -> None:
    """The models of a chain that failed this call or were skipped, to the observers (``model_failed:<name>``,
    ``model_skipped:<name>``) and the call's span (an event each)."""
    context_id = request.metadata.get("context_id", "")
    for name, error in route.failed:
        deps.observe(f"model_failed:{name}", context_id, 1.0)
        span.add_event("gen_ai.model.failed", {"gen_ai.request.model": name, "error.message": error[:500]})
    for name in route.skipped:
        deps.observe(f"model_skipped:{name}", context_id, 1.0)
        span.add_event("gen_ai.model.skipped", {"gen_ai.request.model": name})
    if route.answered and span.is_recording():
        span.set_attributes(
            {
                "gen_ai.response.model": route.answered,
                "gen_ai.system": route.provider,
                "gen_ai.provider.name": route.provider,
            }
        )


async def as_response(
    chunks: AsyncGenerator[str, None], output_type: str, speakers: tuple[str, ...]
) -> AsyncGenerator[str, None]:
    """A plain-text answer (the compact prompt) as a response with one output of ``output_type``, ended where the
    model starts a turn nobody wrote (one of ``speakers``; the stream is then closed, which stops the
    generation). An answer that starts with ``<`` is the response format already and passes as it is."""
    try:
        async for text in _wrapped(chunks, output_type, speakers):
            yield text
    finally:
        await chunks.aclose()


async def _wrapped(chunks: AsyncIterator[str], output_type: str, speakers: tuple[str, ...]) -> AsyncIterator[str]:
    guard = TurnGuard(speakers)
    head = ""
    plain: bool | None = None
    async for chunk in chunks:
        if plain is None:
            head += chunk
            if not head.strip():
                continue
            plain = not head.lstrip().startswith("<")
            if not plain:
                yield head
                continue
            yield f'<response><output type="{xml_attr(output_type)}">'
            chunk = head
        if not plain:
            yield chunk
            continue
        text = guard.feed(chunk)
        if text:
            yield text
        if guard.cut:
            break
    if plain is None and head:
        yield head
    elif plain:
        yield guard.close() + "</output></response>"


def images_in(state: ContextState, prompt: str) -> tuple[ImagePart, ...]:
    """The images this run fetched that the prompt shows (an input may have left the window)."""
    images = []
    for loaded in loaded_of(state.values).values():
        if loaded.data is None:
            continue
        marker = image_marker(loaded.attachment)
        if marker in prompt:
            images.append(ImagePart(marker=marker, mime=loaded.attachment.mime or "image/jpeg", data=loaded.data))
    return tuple(images)
