"""Anthropic's Messages API through the ``anthropic`` SDK, streamed.

The SDK is imported when the model is built, so ``import core`` stays light. The Messages API of this SDK
generation has no sampling parameters, so ``LLM_TEMPERATURE`` does not apply here. Its own retries are off; ours
(``retry.py``) back off with jitter, honour ``Retry-After`` and never retry once text has been handed out.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ..errors import BotError, ConfigError, ModelError
from .base import ModelRequest, ModelUsage, interleave, report_reasoning, report_usage
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
    from anthropic import AsyncAnthropic

__all__ = ("ANTHROPIC_BASE_URL", "DEFAULT_ANTHROPIC_MODEL", "AnthropicModel")

log = logging.getLogger(__name__)

DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"
"""The model used when ``LLM_MODEL`` is empty."""
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
"""Where requests go without ``LLM_BASE_URL``."""

_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "invalid_request_error": 400,
}
"""HTTP status of an error that arrives as an event inside a 200 stream, by its ``error.type``."""


class AnthropicModel:
    """Streams answers from Anthropic's Messages API."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str = DEFAULT_ANTHROPIC_MODEL,
        base_url: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        vision: bool = True,
        thinking_budget: int | None = None,
    ) -> None:
        try:
            import anthropic
        except ImportError as exc:  # pragma: no cover - anthropic is a base dependency
            raise ConfigError("LLM_PROVIDER=anthropic needs the anthropic package: run pip install anthropic") from exc
        self.model = model
        """The model name sent with every request (``LLM_MODEL``)."""
        self.name = f"anthropic:{model}"
        self.base_url = base_url or ANTHROPIC_BASE_URL
        """The server (``LLM_BASE_URL``; api.anthropic.com by default)."""
        self.timeout = timeout
        """Seconds to wait for a connection or for the next bytes of the answer (``LLM_TIMEOUT``)."""
        self.retry = retry or RetryPolicy()
        """Retries on 429, 529, 5xx and connection failures."""
        self.vision = vision
        """Send images as image blocks (``LLM_VISION``; False: the model gets stand-in text)."""
        self.thinking_budget = thinking_budget
        """Tokens the model may think before it answers (extended thinking; at least 1024, and the request's
        ``max_tokens`` is raised above it); its thinking streams as ``reasoning`` events. None: no thinking."""
        self.last_usage: ModelUsage | None = None
        """Token counts of the last call (for metrics)."""
        self._secret = api_key
        self._where = (
            "Anthropic (api.anthropic.com)" if base_url is None else f"the server at {safe_url(self.base_url)}"
        )
        self._client: AsyncAnthropic = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=self.base_url, timeout=timeout, max_retries=0
        )

    def __repr__(self) -> str:
        return f"AnthropicModel(model={self.model!r}, base_url={safe_url(self.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Stream the answer to ``request``; failures raise ``ModelError`` / ``ModelAuthError``."""
        async with aclosing(
            retrying_stream(lambda: self._attempt(request), policy=self.retry, classify=self._classify, label=self.name)
        ) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[str, None]:
        options: dict[str, Any] = {}
        if request.system:  # (the stable part of the prompt, marked for Anthropic's prompt cache)
            options["system"] = [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}]
        stop = [s for s in request.stop if s.strip()]  # whitespace-only stop sequences are refused
        if stop:
            options["stop_sequences"] = stop
        max_tokens = request.max_tokens
        if self.thinking_budget is not None:
            options["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
            max_tokens += self.thinking_budget  # the budget counts in max_tokens: the answer keeps its own
        stream = await self._client.messages.create(
            model=request.model or self.model,
            max_tokens=max_tokens,
            messages=[{"role": "user", "content": _content(request)}],
            stream=True,
            **options,
        )
        usage = ModelUsage()
        async with stream:
            async for event in stream:
                if event.type == "content_block_delta":
                    if event.delta.type == "text_delta" and event.delta.text:
                        yield event.delta.text
                    elif event.delta.type == "thinking_delta":  # the model's thinking block, apart from the answer
                        report_reasoning(event.delta.thinking)
                elif event.type == "message_start":
                    reported = event.message.usage  # (input_tokens leaves out what the cache read and wrote)
                    cached = getattr(reported, "cache_read_input_tokens", None) or 0
                    written = getattr(reported, "cache_creation_input_tokens", None) or 0
                    usage.input_tokens = (reported.input_tokens or 0) + cached + written
                    usage.cached_input_tokens = cached
                    usage.output_tokens = reported.output_tokens or 0
                elif event.type == "message_delta":
                    usage.output_tokens = event.usage.output_tokens or usage.output_tokens
        self.last_usage = usage
        report_usage(usage)
        log.debug("%s used %d+%d tokens", self.name, usage.input_tokens, usage.output_tokens)

    def _classify(self, exc: Exception) -> Failure | None:
        import anthropic

        if isinstance(exc, BotError):
            return None
        if isinstance(exc, anthropic.APITimeoutError):
            return Failure(
                error=ModelError(
                    f"{self._where} sent no answer within {self.timeout:g}s: raise LLM_TIMEOUT or try again later",
                    transient=True,
                )
            )
        if isinstance(exc, anthropic.APIConnectionError):
            return Failure(
                error=ModelError(
                    f"cannot reach {self._where}: check the network (and LLM_BASE_URL if set)", transient=True
                ),
                retryable=True,
            )
        if isinstance(exc, anthropic.APIStatusError):
            kind, detail = _error_of(exc.body, exc.message)
            status = exc.status_code
            if status < 400:  # an error event inside the stream
                status = _STREAM_ERROR_STATUS.get(kind, 500)
            return http_failure(
                status,
                detail,
                where=self._where,
                model=self.model,
                retry_after=parse_retry_after(exc.response.headers),
                secret=self._secret,
            )
        transport = transport_failure(exc, self._where, self.timeout)
        if transport is not None:
            return transport
        detail = redact(str(exc), self._secret)[:300]
        return Failure(error=ModelError(f"{self._where} failed: {type(exc).__name__}: {detail}"))


def _content(request: ModelRequest) -> Any:
    """The prompt, or with images: text blocks with each image (base64) where its marker is."""
    if not request.images:
        return request.prompt
    blocks: list[dict[str, Any]] = []
    for part in interleave(request.prompt, request.images):
        if isinstance(part, str):
            blocks.append({"type": "text", "text": part})
        else:
            data = base64.b64encode(part.data).decode("ascii")
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": part.mime, "data": data}})
    return blocks


def _error_of(body: object, fallback: str) -> tuple[str, str]:
    """``(error.type, error.message)`` of an Anthropic error body."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("type", "")), str(error.get("message", fallback))
    return "", fallback
