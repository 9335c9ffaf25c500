"""A fake OpenAI-compatible server on 127.0.0.1: ``POST /v1/chat/completions`` streamed as server-sent events,
``POST /v1/audio/transcriptions`` (multipart upload, answered with ``transcript``), and ``POST /v1/embeddings``
(``fake_embedding``: words hashed into a small vector, some synonyms folded together, so meaning can rank a
passage that shares no word with the question).

Each request takes the next scripted ``Reply`` (or the default one): a streamed answer, an error status with
headers (``Retry-After``), a stall that never answers, an error event in the middle of the stream, or a
connection cut off in the middle of it. The server checks the bearer key when given one and, like the real API,
echoes part of a wrong key in its error.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import re
import struct
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from core.models import OpenAICompatModel, RetryPolicy

__all__ = ("EMBED_DIMENSIONS", "FakeModelServer", "FakeOpenAIServer", "Recorded", "Reply", "fake_embedding")

EMBED_DIMENSIONS = 64
"""The length of the fake embeddings."""
_SYNONYMS = {
    "money": "refund",
    "reimburse": "refund",
    "reimbursed": "refund",
    "refunds": "refund",
    "repaid": "refund",
    "parcel": "shipping",
    "parcels": "shipping",
    "delivery": "shipping",
    "vacation": "holidays",
    "leave": "holidays",
}


def fake_embedding(text: str) -> list[float]:
    """A unit vector of ``text``'s words (each hashed to one of ``EMBED_DIMENSIONS``, synonyms folded first)."""
    vector = [0.0] * EMBED_DIMENSIONS
    for word in re.findall(r"[a-z]+", text.lower()):
        if len(word) > 3:
            word = _SYNONYMS.get(word, word)
            vector[hashlib.sha256(word.encode()).digest()[0] % EMBED_DIMENSIONS] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted answer."""

    chunks: Sequence[str] = ("Hello", " there")
    """Text pieces, one event each."""
    status: int = 200
    """An error status instead of a stream."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers (``retry-after``)."""
    message: str = "scripted failure"
    """The error message of an error status."""
    stall: bool = False
    """Never answer (until the server closes)."""
    delay: float = 0.0
    """Seconds before the answer begins (a model slow to start)."""
    fail_after: int | None = None
    """Send this many chunks, then an error event."""
    drop_after: int | None = None
    """Send this many chunks, then cut the connection off (no end of the stream)."""
    usage: tuple[int, int] | None = (12, 3)
    """(input, output) tokens reported at the end, if the client asks for usage."""
    cached: int = 0
    """Of the input tokens, those reported as read from the prompt cache (OpenAI's ``cached_tokens``, Anthropic's
    ``cache_read_input_tokens``)."""
    reasoning: Sequence[str] = ()
    """The model's own reasoning, streamed before the text, one event each (a reasoning model)."""
    reasoning_field: str = "reasoning_content"
    """The delta field the OpenAI-compatible fake sends it in (``reasoning_content`` or ``reasoning``)."""


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """One request as the server saw it."""

    path: str
    headers: Mapping[str, str]
    body: dict[str, Any]


class _Cut(Exception):
    """Raised by ``stream`` to cut the connection off half-way (``Reply.drop_after``)."""


class FakeModelServer:
    """Scripted replies, recorded requests, start/close on a free loopback port."""

    routes: Sequence[tuple[str, str]] = ()
    """(method, path) pairs served by ``handle``."""
    extra_routes: Sequence[tuple[str, str, str]] = ()
    """(method, path, name of the handler method) served by other handlers."""

    def __init__(self, *, replies: Sequence[Reply] = (), default: Reply | None = None, api_key: str | None = None):
        self.replies: deque[Reply] = deque(replies)
        self.default = default or Reply()
        self.api_key = api_key
        self.requests: list[Recorded] = []
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeModelServer:
        app = web.Application()
        for method, path in self.routes:
            app.router.add_route(method, path, self._handle)
        for method, path, handler in self.extra_routes:
            app.router.add_route(method, path, getattr(self, handler))
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            body = {}
        self.requests.append(Recorded(path=request.path, headers=dict(request.headers), body=body))
        reply = self.replies.popleft() if self.replies else self.default
        given = self.key_of(request)
        if self.api_key is not None and given != self.api_key:
            return self.auth_error(given)
        if reply.stall:
            await self._release.wait()
            return web.Response(status=503)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status != 200:
            return self.error(reply)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        try:
            await self.stream(response, reply, body)
        except _Cut:
            if request.transport is not None:
                request.transport.abort()
            return response
        await response.write_eof()
        return response

    def key_of(self, request: web.Request) -> str:
        raise NotImplementedError

    def auth_error(self, given: str) -> web.Response:
        raise NotImplementedError

    def error(self, reply: Reply) -> web.Response:
        raise NotImplementedError

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        raise NotImplementedError


class FakeOpenAIServer(FakeModelServer):
    """The chat completions endpoint of OpenAI, vLLM, llama.cpp and Ollama."""

    routes = (("POST", "/v1/chat/completions"),)
    extra_routes = (
        ("POST", "/v1/audio/transcriptions", "_transcribe"),
        ("POST", "/v1/images/generations", "_picture"),
        ("POST", "/v1/audio/speech", "_speech"),
        ("POST", "/v1/embeddings", "_embeddings"),
    )
    picture = b"\x89PNG\r\n\x1a\n" + b"fake-picture" * 8
    """The bytes every picture is (a PNG's signature first)."""
    speech = b"OggS\x00\x02" + b"fake-opus" * 8
    """The bytes every spoken text is (an OGG page's signature first)."""
    transcript = "what is the weather like today"
    """What every transcription answers."""
    transcription_status = 200
    """An error status for transcriptions instead (500: the server fails)."""
    picture_status = 200
    """An error status for pictures instead."""
    speech_status = 200
    """An error status for speech instead."""
    embeddings_status = 200
    """An error status for embeddings instead (its message repeats the key it was given, as careless servers do)."""

    def model(self, name: str) -> OpenAICompatModel:
        """The bot's OpenAI-compatible provider for model ``name``, pointed at this server, without retries (close
        it with ``aclose``)."""
        return OpenAICompatModel(model=name, base_url=self.url, retry=RetryPolicy(retries=0))

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        body: dict[str, Any] = {"model": form.get("model")}
        if isinstance(upload, web.FileField):
            data = upload.file.read()
            body.update(file_name=upload.filename, file_size=len(data), content_type=upload.content_type)
        self.requests.append(Recorded(path=request.path, headers=dict(request.headers), body=body))
        given = self.key_of(request)
        if self.api_key is not None and given != self.api_key:
            return self.auth_error(given)
        if self.transcription_status != 200:
            return self.error(Reply(status=self.transcription_status))
        return web.json_response({"text": self.transcript})

    async def _picture(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(Recorded(path=request.path, headers=dict(request.headers), body=body))
        given = self.key_of(request)
        if self.api_key is not None and given != self.api_key:
            return self.auth_error(given)
        if self.picture_status != 200:
            return self.error(Reply(status=self.picture_status))
        encoded = base64.b64encode(self.picture).decode()
        return web.json_response({"created": int(time.time()), "data": [{"b64_json": encoded}]})

    async def _speech(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(Recorded(path=request.path, headers=dict(request.headers), body=body))
        given = self.key_of(request)
        if self.api_key is not None and given != self.api_key:
            return self.auth_error(given)
        if self.speech_status != 200:
            return self.error(Reply(status=self.speech_status))
        return web.Response(body=self.speech, content_type="audio/ogg")

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(Recorded(path=request.path, headers=dict(request.headers), body=body))
        given = self.key_of(request)
        if self.api_key is not None and given != self.api_key:
            return self.auth_error(given)
        if self.embeddings_status != 200:
            return self.error(Reply(status=self.embeddings_status, message=f"embedding failed for key {given}"))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = [fake_embedding(t) for t in texts]
        if body.get("encoding_format") == "base64":  # what the openai package asks for unless told otherwise
            encoded: list[Any] = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() for v in vectors]
        else:
            encoded = vectors
        data = [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(encoded)]
        data.reverse()  # the index, not the order, says which text a vector is of
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return web.json_response({"object": "list", "data": data, "model": body.get("model", ""), "usage": usage})

    @property
    def url(self) -> str:
        """The base URL to give the client."""
        return f"{self.root}/v1"

    def key_of(self, request: web.Request) -> str:
        return request.headers.get("Authorization", "").removeprefix("Bearer ")

    def auth_error(self, given: str) -> web.Response:
        message = f"Incorrect API key provided: {given}. Find your key at https://platform.openai.com/account"
        body = {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}
        return web.json_response(body, status=401)

    def error(self, reply: Reply) -> web.Response:
        body = {"error": {"message": reply.message, "type": "server_error", "code": None}}
        return web.json_response(body, status=reply.status, headers=dict(reply.headers))

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = body.get("model", "")

        async def send(data: dict[str, Any]) -> None:
            await response.write(f"data: {json.dumps({**base, **data})}\n\n".encode())

        await send({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
        for thought in reply.reasoning:
            delta = {reply.reasoning_field: thought, "content": None}
            await send({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        for i, text in enumerate(reply.chunks):
            if reply.drop_after is not None and i == reply.drop_after:
                raise _Cut
            if reply.fail_after is not None and i == reply.fail_after:
                error = {"error": {"message": "the model crashed", "type": "server_error"}}
                await response.write(f"data: {json.dumps(error)}\n\n".encode())
                return
            await send({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
        await send({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if reply.usage is not None and (body.get("stream_options") or {}).get("include_usage"):
            prompt, completion = reply.usage
            usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
            if reply.cached:
                usage["prompt_tokens_details"] = {"cached_tokens": reply.cached}  # type: ignore[assignment]
            await send({"choices": [], "usage": usage})
        await response.write(b"data: [DONE]\n\n")
