"""Traces: a thin layer over the OpenTelemetry API that costs nothing while tracing is off.

``bots`` installs a tracer (``install``) when ``TRACING_ENABLED`` is set; until then every call here returns a
shared no-op object at once, without importing OpenTelemetry or building an attribute. Code that would compute
attributes checks ``span.recording`` (or ``active()``) first.

One message is one trace: the gateway's span for the platform event is the parent of the ingest; the ingest
stores its context with the input as a W3C ``traceparent`` (``traceparent()``), and the worker that runs the
batch, the first or one that took it over, continues it (``parent_from``).

Privacy: message text, prompts and model output go into spans only when content capture is on
(``capture_content()``); user and chat ids go through ``ident`` (hashed unless told otherwise); tokens and keys
never.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer

__all__ = (
    "NO_SPAN",
    "SpanLike",
    "active",
    "capture_content",
    "current",
    "current_ids",
    "ident",
    "install",
    "parent_from",
    "span",
    "start",
    "traceparent",
    "uninstall",
)

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float] | Sequence[bool]


class SpanLike(Protocol):
    """What callers use of a span (an OpenTelemetry ``Span``, or ``NO_SPAN``)."""

    def is_recording(self) -> bool: ...
    def set_attribute(self, key: str, value: AttributeValue) -> None: ...
    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None: ...
    def add_event(
        self, name: str, attributes: Mapping[str, AttributeValue] | None = None, timestamp: int | None = None
    ) -> None: ...
    def record_exception(self, exception: BaseException, *args: Any, **kwargs: Any) -> None: ...
    def end(self, end_time: int | None = None) -> None: ...


class _NoSpan:
    """The span of every call while tracing is off: does nothing."""

    __slots__ = ()

    def is_recording(self) -> bool:
        return False

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        pass

    def add_event(
        self, name: str, attributes: Mapping[str, AttributeValue] | None = None, timestamp: int | None = None
    ) -> None:
        pass

    def record_exception(self, exception: BaseException, *args: Any, **kwargs: Any) -> None:
        pass

    def end(self, end_time: int | None = None) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        pass


NO_SPAN: Any = _NoSpan()
"""The no-op span (also its own context manager)."""


class _State:
    __slots__ = ("capture", "hash_ids", "tracer")

    def __init__(self) -> None:
        self.tracer: Tracer | None = None
        self.capture = False
        self.hash_ids = True


_state = _State()


def install(tracer: Tracer, *, capture_content: bool = False, hash_ids: bool = True) -> None:
    """Trace with ``tracer`` from now on. ``capture_content`` lets message text, prompts and model output
    into spans; ``hash_ids=False`` keeps user and chat ids readable."""
    _state.tracer = tracer
    _state.capture = capture_content
    _state.hash_ids = hash_ids


def uninstall() -> None:
    """Stop tracing (every call is a no-op again)."""
    _state.tracer = None
    _state.capture = False
    _state.hash_ids = True


def active() -> bool:
    """True while a tracer is installed."""
    return _state.tracer is not None


def capture_content() -> bool:
    """True when message text, prompts and model output may go into spans."""
    return _state.tracer is not None and _state.capture


def ident(value: object) -> str:
    """A user or chat id as spans show it: a short hash unless the operator asked for the ids themselves."""
    text = str(value)
    if not _state.hash_ids:
        return text
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def span(
    name: str,
    *,
    kind: str | None = None,
    parent: Context | None = None,
    links: Sequence[Context] = (),
    start_time: float | None = None,
) -> Any:
    """A context manager: a span made current for its block (``NO_SPAN`` while tracing is off). ``kind`` is
    ``server``, ``client``, ``producer``, ``consumer`` or ``internal``; ``parent`` a context from
    ``parent_from``; ``links`` other traces' contexts (a batch of several messages); ``start_time`` in
    seconds since the epoch. An exception leaving the block is recorded and sets the status to error."""
    tracer = _state.tracer
    if tracer is None:
        return NO_SPAN
    return tracer.start_as_current_span(name, **_options(kind, parent, links, start_time))


def start(
    name: str,
    *,
    kind: str | None = None,
    parent: Context | None = None,
    start_time: float | None = None,
) -> SpanLike:
    """A span not made current (its owner calls ``end``): for work that spans an async generator's yields."""
    tracer = _state.tracer
    if tracer is None:
        return NO_SPAN  # type: ignore[no-any-return]
    return tracer.start_span(name, **_options(kind, parent, (), start_time))


def _options(kind: str | None, parent: Context | None, links: Sequence[Context], start_time: float | None) -> Any:
    from opentelemetry import trace

    options: dict[str, Any] = {}
    if kind is not None:
        options["kind"] = trace.SpanKind[kind.upper()]
    if parent is not None:
        options["context"] = parent
    if links:
        found = [trace.get_current_span(c).get_span_context() for c in links]
        options["links"] = [trace.Link(s) for s in found if s.is_valid]
    if start_time is not None:
        options["start_time"] = int(start_time * 1e9)
    return options


def traceparent() -> str | None:
    """The current span's W3C ``traceparent`` (None while tracing is off or outside a span)."""
    if _state.tracer is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def parent_from(value: str | None) -> Context | None:
    """The context a stored ``traceparent`` names, to continue its trace (None: off, absent or malformed)."""
    if _state.tracer is None or not value:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract({"traceparent": value})
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def current() -> SpanLike:
    """The current span (``NO_SPAN`` while tracing is off or outside a span)."""
    if _state.tracer is None:
        return NO_SPAN  # type: ignore[no-any-return]
    from opentelemetry import trace

    found: SpanLike = trace.get_current_span()
    return found


def current_ids() -> tuple[str, str] | None:
    """The current trace and span ids in hex (for log lines), None outside a recorded span."""
    if _state.tracer is None:
        return None
    from opentelemetry import trace

    found = trace.get_current_span().get_span_context()
    if not found.is_valid:
        return None
    return f"{found.trace_id:032x}", f"{found.span_id:016x}"
