"""``TRACING_*``: OpenTelemetry traces of every message, from the gateway that received it to the worker that
answered it (``core.tracing``).

With ``TRACING_ENABLED`` the SDK exports spans over OTLP/HTTP; where to and how is the SDK's own ``OTEL_*``
variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME``,
``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_SCHEDULE_DELAY``...). Off, nothing is imported and no span is made.
"""

from __future__ import annotations

import contextlib
import logging
import os
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, field_validator

from core import tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ("HEADER_VARIABLES", "TracingSettings", "header_secrets", "start_tracing", "tracing_problems")

log = logging.getLogger("bots.tracing")

CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI instrumentations' own switch for message content, honoured as ``TRACING_CAPTURE_CONTENT`` is."""

HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
"""The SDK's variables of the headers sent to the collector: ``authorization=Bearer%20<token>``, secrets."""

_INTEGER_VARIABLES = {
    "OTEL_BSP_SCHEDULE_DELAY": 1,
    "OTEL_BSP_MAX_QUEUE_SIZE": 1,
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 1,
    "OTEL_BSP_EXPORT_TIMEOUT": 0,
}
"""The SDK's batch settings, integers at least this: it logs a traceback for one that is not an integer (and uses
its default), and raises one at the start for one below (the first three: 0 or negative), or a batch larger than the
queue."""

_SECRET_HEADER = ("auth", "key", "token", "secret", "password", "cookie", "signature")
"""Words that make a header's value a secret (``authorization``, ``x-api-key``); other values (a tenant id) are
shown in logs, unless long enough to be a credential."""


class TracingSettings(BaseModel):
    """``TRACING_*``: OpenTelemetry traces (the exporter reads the SDK's ``OTEL_*`` variables)."""

    enabled: bool = Field(
        default=False,
        description="Export a trace of every message over OTLP/HTTP (to OTEL_EXPORTER_OTLP_ENDPOINT, by default "
        "http://localhost:4318); needs the tracing extra",
    )
    capture_content: bool = Field(
        default=False,
        description="Put message text, prompts and model output in spans (also "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true); off: only ids, sizes and token counts",
    )
    hash_ids: bool = Field(
        default=True, description="Show user and chat ids in spans as short hashes (false: the ids themselves)"
    )
    ui_url: str = Field(
        default="",
        description="The trace viewer's address of one trace, {trace_id} standing for its id "
        "(http://127.0.0.1:16686/trace/{trace_id} for Jaeger): the console links each run of a conversation to it",
    )

    @field_validator("ui_url")
    @classmethod
    def _viewer_address(cls, value: str) -> str:
        value = value.strip()
        if value and (not value.startswith(("http://", "https://")) or "{trace_id}" not in value):
            raise ValueError(
                "TRACING_UI_URL must be an http(s) address holding {trace_id}, such as "
                "http://127.0.0.1:16686/trace/{trace_id}, or empty (the console shows trace ids without links)"
            )
        return value

    def trace_link(self, trace_id: str) -> str | None:
        """The viewer's address of the trace ``trace_id`` (None without ``ui_url``)."""
        return self.ui_url.replace("{trace_id}", trace_id) if self.ui_url else None


def header_secrets(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The headers of ``HEADER_VARIABLES`` (each item, its value, the value decoded), masked in logs like the
    settings' secrets: the SDK logs an item it cannot read as it was written."""
    found: list[str] = []
    for name in HEADER_VARIABLES:
        for item in environ.get(name, "").split(","):
            header, sep, value = (part.strip() for part in item.partition("="))
            if not sep:  # not name=value: the SDK logs it whole
                found.append(item.strip())
            elif any(word in header.lower() for word in _SECRET_HEADER) or len(value) >= 16:
                found += [item.strip(), value, urllib.parse.unquote(value)]
    return [s for s in found if len(s) >= 4]


def tracing_problems(settings: TracingSettings, environ: Mapping[str, str] = os.environ) -> list[str]:
    """What the SDK would log and work around with ``TRACING_ENABLED`` (a header without ``=``, a batch setting that
    is not a number), one line each naming the variable; a header is never repeated."""
    if not settings.enabled:
        return []
    problems = [
        f"{name}: an item has no '=': write name=value pairs separated by commas, the value URL-encoded, for "
        "example authorization=Bearer%20<token>"
        for name in HEADER_VARIABLES
        if any(item.strip() and "=" not in item for item in environ.get(name, "").split(","))
    ]
    numbers = {"OTEL_BSP_MAX_QUEUE_SIZE": 2048, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 512}  # (the SDK's defaults)
    for name, least in _INTEGER_VARIABLES.items():
        value = environ.get(name, "").strip()
        if not value:
            continue
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or number < least:
            least_text = "above 0" if least else "of 0 or more"
            problems.append(f"{name}={value[:20]!r} is not a whole number {least_text}: fix it or unset it")
        else:
            numbers[name] = number
    if numbers["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] > numbers["OTEL_BSP_MAX_QUEUE_SIZE"]:
        problems.append(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE is above OTEL_BSP_MAX_QUEUE_SIZE (2048 by default): lower it or raise the "
            "queue"
        )
    return problems


def _capture(settings: TracingSettings) -> bool:
    return settings.capture_content or os.environ.get(CAPTURE_VARIABLE, "").strip().lower() == "true"


@contextlib.contextmanager
def start_tracing(
    settings: TracingSettings, *, role: str, exporter: SpanExporter | None = None
) -> Iterator[TracerProvider | None]:
    """Trace while the block lasts (``role``: run, gateway or worker, the default ``service.name`` is
    ``bots-<role>``); the spans still buffered are exported at its end. ``exporter`` replaces OTLP/HTTP (tests).
    Yields the SDK's provider, or None when tracing is off."""
    if not settings.enabled:
        yield None
        return
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        from core.errors import ConfigError

        raise ConfigError(
            "TRACING_ENABLED is set but OpenTelemetry is not installed: pip install 'daydreams-bots[tracing]', "
            "or unset TRACING_ENABLED"
        ) from exc
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()  # OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT...
    attributes = {"bots.role": role}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = f"bots-{role}"
    provider = TracerProvider(resource=Resource.create(attributes))  # OTEL_TRACES_SAMPLER is read here
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracing.install(provider.get_tracer("bots"), capture_content=_capture(settings), hash_ids=settings.hash_ids)
    log.info("tracing on (%s), content capture %s", role, "on" if tracing.capture_content() else "off")
    try:
        yield provider
    finally:
        tracing.uninstall()
        provider.shutdown()  # exports what is buffered
