"""An OpenAI-compatible chat model through the ``openai`` SDK: OpenAI itself, vLLM, llama.cpp's server, Ollama,
OpenRouter, anything that speaks ``/v1/chat/completions`` with server-sent events.

The SDK (about half a second of imports) is not imported when the model is built: ``preload()`` imports it and
makes the client in a thread (``bots`` calls it as the bot starts, so the platforms connect meanwhile), and the
first request awaits that, or starts it. Its own retries are off: ours (``retry.py``) back off with jitter, honour
``Retry-After`` and never retry once text has been handed out.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import logging
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ..errors import BotError, ConfigError, ModelError
from .base import ModelRequest, ModelUsage, interleave, report_reasoning, report_usage, without_images
from .retry import (
    Failure,
    RetryPolicy,
    http_failure,
    parse_retry_after,
    redact,
    retrying_stream,
    safe_url,
    transport_failure,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletionContentPartParam, ChatCompletionMessageParam

__all__ = ("DEFAULT_OPENAI_MODEL", "OPENAI_BASE_URL", "OpenAICompatModel", "is_loopback")

log = logging.getLogger(__name__)

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
"""The model used against api.openai.com when ``LLM_MODEL`` is empty."""
OPENAI_BASE_URL = "https://api.openai.com/v1"
"""Where requests go without ``LLM_BASE_URL``."""
_NO_KEY = "no-key"
"""Sent to servers that need no key (the SDK insists on one)."""
_MAX_STOP = 4
"""OpenAI accepts at most four stop sequences."""


class OpenAICompatModel:
    """Streams chat completions from an OpenAI-compatible server."""

    def __init__(
        self,
        *,
        model: str = DEFAULT_OPENAI_MODEL,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        vision: bool = True,
    ) -> None:
        self.model = model
        """The model name sent with every request (``LLM_MODEL``)."""
        self.name = f"openai:{model}"
        self.base_url = base_url or OPENAI_BASE_URL
        """The server (``LLM_BASE_URL``)."""
        self.temperature = temperature
        """Sampling temperature (``LLM_TEMPERATURE``); None leaves the server's default."""
        self.timeout = timeout
        """Seconds to wait for a connection or for the next bytes of the answer (``LLM_TIMEOUT``)."""
        self.retry = retry or RetryPolicy()
        """Retries on 429, 5xx and connection failures."""
        self.vision = vision
        """Send images as image parts (``LLM_VISION``; False for a text-only model: it gets stand-in text)."""
        self.images_refused = False
        """The server refused a request for its images (a text-only model with ``LLM_VISION`` left on): images
        are replaced by a note from then on."""
        self.last_usage: ModelUsage | None = None
        """Token counts of the last call that reported them (for metrics)."""
        self._secret = api_key
        self._where = "OpenAI (api.openai.com)" if base_url is None else f"the server at {safe_url(self.base_url)}"
        self._client: AsyncOpenAI | None = None
        self._loading: asyncio.Future[AsyncOpenAI] | None = None

    def _new_client(self) -> AsyncOpenAI:
        """The SDK's client (imports the SDK: run in a thread)."""
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a base dependency
            raise ConfigError("LLM_PROVIDER=openai needs the openai package: run pip install openai") from exc
        # a server on this machine is reached directly, whatever HTTP(S)_PROXY says
        http_client = openai.DefaultAsyncHttpxClient(trust_env=False) if is_loopback(self.base_url) else None
        return openai.AsyncOpenAI(
            api_key=self._secret or _NO_KEY,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            http_client=http_client,
        )

    def preload(self) -> None:
        """Import the SDK and make the client in a thread from now on (on the running event loop); a request
        made before it is done waits for it. Called again, or once the client is made, it does nothing."""
        if self._client is None and self._loading is None:
            self._loading = asyncio.ensure_future(asyncio.to_thread(self._new_client))

    async def connect(self) -> None:
        """Return once the client is made (``preload``'s thread, started here if nothing started it)."""
        await self._connected()

    async def _connected(self) -> AsyncOpenAI:
        """The client, made by ``preload``'s thread (started here if nothing started it)."""
        if self._client is None:
            self.preload()
            assert self._loading is not None
            client = await asyncio.shield(self._loading)  # (one caller cancelled leaves the others the client)
            if self._client is None:
                self._client = client
        return self._client

    def __repr__(self) -> str:
        return f"OpenAICompatModel(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP connections (and wait for ``preload``'s thread, which cannot be interrupted)."""
        loading, self._loading = self._loading, None
        if loading is not None and self._client is None:
            with contextlib.suppress(Exception):
                self._client = await loading
        if self._client is not None:
            await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Stream the answer to ``request``; failures raise ``ModelError`` / ``ModelAuthError``. A server that
        refuses images (a text-only model) is asked again with notes in their place, and never sent images
        again by this model."""
        if request.images and self.images_refused:
            request = without_images(request, _REFUSED_NOTE)
        started = False
        try:
            async with aclosing(
                retrying_stream(
                    lambda: self._attempt(request), policy=self.retry, classify=self._classify, label=self.name
                )
            ) as chunks:
                async for chunk in chunks:
                    started = True
                    yield chunk
            return
        except ModelError as exc:
            if started or not request.images or not _refuses_images(exc.__cause__):
                raise
        self.images_refused = True
        log.warning(
            "%s refused a request with images: pictures become a note from now on (set LLM_VISION=false for a "
            "model that does not see images)",
            self._where,
        )
        text_only = without_images(request, _REFUSED_NOTE)
        async with aclosing(
            retrying_stream(
                lambda: self._attempt(text_only), policy=self.retry, classify=self._classify, label=self.name
            )
        ) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[str, None]:
        messages: list[ChatCompletionMessageParam] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        if request.images:
            messages.append({"role": "user", "content": _content_parts(request)})
        elif request.turns:
            for role, text in request.turns:
                if role == "assistant":
                    messages.append({"role": "assistant", "content": text})
                else:
                    messages.append({"role": "user", "content": text})
        else:
            messages.append({"role": "user", "content": request.prompt})
        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if request.stop:
            options["stop"] = list(request.stop[:_MAX_STOP])
        client = await self._connected()
        stream = await client.chat.completions.create(
            model=request.model or self.model,
            messages=messages,
            max_tokens=request.max_tokens,
            stream=True,
            stream_options={"include_usage": True},
            **options,
        )
        usage: ModelUsage | None = None
        async with stream:
            async for chunk in stream:
                if chunk.usage is not None:
                    details = getattr(chunk.usage, "prompt_tokens_details", None)  # (OpenAI's automatic caching)
                    usage = ModelUsage(
                        input_tokens=chunk.usage.prompt_tokens or 0,
                        output_tokens=chunk.usage.completion_tokens or 0,
                        cached_input_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0,
                    )
                for choice in chunk.choices:
                    if choice.index != 0 or choice.delta is None:
                        continue
                    thought = _reasoning(choice.delta)
                    if thought:
                        report_reasoning(thought)
                    if choice.delta.content:
                        yield choice.delta.content
        if usage is not None:
            self.last_usage = usage
            report_usage(usage)
            log.debug("%s used %d+%d tokens", self.name, usage.input_tokens, usage.output_tokens)

    def _classify(self, exc: Exception) -> Failure | None:
        import openai

        if isinstance(exc, BotError):
            return None
        if isinstance(exc, openai.APITimeoutError):
            return Failure(
                error=ModelError(
                    f"{self._where} sent no answer within {self.timeout:g}s: raise LLM_TIMEOUT or check the server",
                    transient=True,
                )
            )
        if isinstance(exc, openai.APIConnectionError):
            return Failure(
                error=ModelError(
                    f"cannot reach {self._where}: check LLM_BASE_URL and that the server is running", transient=True
                ),
                retryable=True,
            )
        if isinstance(exc, openai.APIStatusError):
            return http_failure(
                exc.status_code,
                _detail(exc.body, exc.message),
                where=self._where,
                model=self.model,
                retry_after=parse_retry_after(exc.response.headers),
                secret=self._secret,
            )
        if isinstance(exc, openai.APIError):  # an error event in the middle of the stream
            detail = redact(_detail(exc.body, exc.message), self._secret)
            return Failure(
                error=ModelError(f"{self._where} reported an error while answering: {detail}", transient=True)
            )
        transport = transport_failure(exc, self._where, self.timeout)
        if transport is not None:
            return transport
        detail = redact(str(exc), self._secret)[:300]
        return Failure(error=ModelError(f"{self._where} failed: {type(exc).__name__}: {detail}"))


_REFUSED_NOTE = "the image could not be shown: this model does not accept images"


def _refuses_images(cause: BaseException | None) -> bool:
    """An error answer that says the model takes no images (OpenAI, vLLM, llama.cpp and Ollama word it alike)."""
    import openai

    if not isinstance(cause, openai.APIStatusError) or cause.status_code not in (400, 415, 422, 500):
        return False
    text = f"{_detail(cause.body, cause.message)} {cause.message}".lower()
    return any(word in text for word in ("image", "multimodal", "vision", "multi-modal"))


def _reasoning(delta: Any) -> str | None:
    """The model's own reasoning in a streamed delta, which the OpenAI API has no field for: ``reasoning_content``
    (DeepSeek, vLLM, llama.cpp's server) or ``reasoning`` (OpenRouter, Ollama), kept by the SDK as extra fields."""
    extra = getattr(delta, "model_extra", None) or {}
    for name in ("reasoning_content", "reasoning"):
        value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _content_parts(request: ModelRequest) -> list[ChatCompletionContentPartParam]:
    """The prompt as text parts with each image (a base64 data URL) where its marker is."""
    parts: list[ChatCompletionContentPartParam] = []
    for part in interleave(request.prompt, request.images):
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        else:
            url = f"data:{part.mime};base64,{base64.b64encode(part.data).decode('ascii')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def is_loopback(url: str) -> bool:
    """True when ``url`` points at this machine."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _detail(body: object, fallback: str) -> str:
    """The human part of an OpenAI-style error body (``{"error": {"message": ...}}``)."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return fallback
