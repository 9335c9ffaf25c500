"""A small OTLP/HTTP receiver on loopback: decodes each ``POST /v1/traces`` (protobuf) with the
``opentelemetry-proto`` classes into ``Received`` spans, so a test can read what processes exported."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ("OtlpReceiver", "Received")


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind is not None else None


@dataclass(kw_only=True)
class Received:
    """One exported span."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[str] = field(default_factory=list)


class OtlpReceiver:
    """``async with OtlpReceiver() as receiver``: listening on ``receiver.endpoint``; ``batches`` counts the
    requests, ``spans`` holds what they carried."""

    def __init__(self) -> None:
        self.batches = 0
        self.spans: list[Received] = []
        self._runner: web.AppRunner | None = None
        self._arrived = asyncio.Event()
        self.endpoint = ""

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.endpoint = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _traces(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf", request.content_type
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        self.batches += 1
        for resource_spans in message.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        Received(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            resource=resource,
                            events=[e.name for e in span.events],
                        )
                    )
        self._arrived.set()
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    async def wait_for(self, found: Any, *, timeout: float = 30.0) -> list[Received]:
        """Wait until ``found(spans)`` returns a true value (returned spans list: what it matched)."""
        async with asyncio.timeout(timeout):
            while True:
                result = found(self.spans)
                if result:
                    return list(result) if not isinstance(result, bool) else self.spans
                self._arrived.clear()
                await self._arrived.wait()
