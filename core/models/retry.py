"""Failures of the network providers and their retries (exponential backoff with full jitter).

A provider turns each library exception into a ``Failure`` (the ``ModelError`` to raise, whether a retry may
help, how long the server asked to wait); ``http_failure`` does it the same way for every provider's HTTP
status. ``retrying_stream`` opens the stream again while that is safe: only before the first chunk reached
the caller, since text already handed out cannot be taken back.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
import urllib.parse
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field

from ..errors import ModelAuthError, ModelError
from ..url_secrets import mask_query

__all__ = (
    "Failure",
    "RetryPolicy",
    "http_failure",
    "parse_retry_after",
    "redact",
    "retrying_stream",
    "safe_url",
    "transport_failure",
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Failure:
    """What a provider made of one failed attempt."""

    error: ModelError
    """The error to raise when no retry is left (or none may help)."""
    retryable: bool = False
    """True for 429, 5xx and connection failures."""
    retry_after: float | None = None
    """Seconds the server asked to wait (``Retry-After``), if it said."""
    hide_cause: bool = False
    """Raise without chaining the library exception (its text may echo the refused key)."""


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often and how long to wait before trying again."""

    retries: int = 3
    """Attempts after the first one (``LLM_RETRIES``)."""
    base_delay: float = 0.5
    """The first backoff window in seconds; it doubles on every attempt."""
    max_delay: float = 20.0
    """No computed backoff is longer than this."""
    max_retry_after: float = 60.0
    """A server asking to wait longer than this is not retried: the error is raised at once."""
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)
    """How to wait (tests record the delays instead of sleeping)."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based): the server's ``Retry-After`` when it
        gave one, else a random point in the doubling window (full jitter)."""
        if retry_after is not None:
            return max(0.0, retry_after)
        window = min(self.max_delay, self.base_delay * (2**attempt))
        return random.uniform(0.0, window)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms``, or ``retry-after`` (seconds or an HTTP date); None if absent."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def redact(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` (servers like to echo part of a refused key back)."""
    if secret:
        text = text.replace(secret, "***")
        if len(secret) > 12:
            text = text.replace(secret[:8], "***").replace(secret[-6:], "***")
    return text


def safe_url(url: str) -> str:
    """``url`` without user and password, and its query values masked (``?api-key=********``), fit for logs and
    error messages."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<invalid url>"
    if parts.username is None and parts.password is None:
        return mask_query(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return mask_query(urllib.parse.urlunsplit(parts._replace(netloc=host)))


def http_failure(
    status: int,
    detail: str,
    *,
    where: str,
    model: str,
    retry_after: float | None = None,
    secret: str | None = None,
) -> Failure:
    """The ``Failure`` of an HTTP error answer, worded alike for every provider.

    ``where`` names the provider or server ("api.openai.com", "the server at http://..."); ``detail`` is the
    server's own message, shown (with the key redacted) except for refused credentials.
    """
    detail = redact(" ".join(detail.split())[:300], secret)
    if status == 401:
        return Failure(
            error=ModelAuthError(f"{where} refused the API key (HTTP 401): set LLM_API_KEY to a valid key"),
            hide_cause=True,
        )
    if status == 403:
        return Failure(
            error=ModelAuthError(
                f"{where} denied access (HTTP 403): check that LLM_API_KEY is valid and may use model {model!r}"
            ),
            hide_cause=True,
        )
    if status == 404:
        return Failure(error=ModelError(f"{where} has no model {model!r} (HTTP 404): check LLM_MODEL and LLM_BASE_URL"))
    if status == 429:
        return Failure(
            error=ModelError(f"{where} is rate limiting requests (HTTP 429): {detail}", transient=True),
            retryable=True,
            retry_after=retry_after,
        )
    if status == 408 or status >= 500:
        return Failure(
            error=ModelError(f"{where} failed (HTTP {status}): {detail}", transient=True),
            retryable=True,
            retry_after=retry_after,
        )
    return Failure(error=ModelError(f"{where} rejected the request (HTTP {status}): {detail}"))


def transport_failure(exc: Exception, where: str, timeout: float) -> Failure | None:
    """The ``Failure`` of an HTTP client's own exception that an SDK let through while reading a stream (the
    server went silent past ``timeout`` or broke the connection off half-way); None for anything else. Both are
    transient, but only retried before the first chunk, as every failure is."""
    import httpx  # the SDKs' HTTP client, imported only by a provider that is built

    if isinstance(exc, httpx.TimeoutException):
        return Failure(
            error=ModelError(
                f"{where} went silent for {timeout:g}s while answering: raise LLM_TIMEOUT or check the server",
                transient=True,
            )
        )
    if isinstance(exc, httpx.TransportError):
        return Failure(
            error=ModelError(
                f"{where} broke the connection off while answering ({type(exc).__name__}): check the server",
                transient=True,
            ),
            retryable=True,
        )
    return None


async def retrying_stream(
    open_stream: Callable[[], AsyncGenerator[str, None]],
    *,
    policy: RetryPolicy,
    classify: Callable[[Exception], Failure | None],
    label: str,
) -> AsyncGenerator[str, None]:
    """Yield the chunks of ``open_stream()``; on a retryable failure before the first chunk, wait and open it
    again, at most ``policy.retries`` times. ``classify`` returns None for exceptions it does not know, which
    then propagate unchanged (a ``ModelError`` raised by the provider itself, for instance)."""
    attempt = 0
    while True:
        produced = False
        try:
            async with aclosing(open_stream()) as stream:
                async for chunk in stream:
                    produced = True
                    yield chunk
            return
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            if failure.hide_cause:
                raise failure.error from None
            if produced or not failure.retryable:
                raise failure.error from exc
            if failure.retry_after is not None and failure.retry_after > policy.max_retry_after:
                raise ModelError(
                    f"{failure.error} (the server asked to wait {failure.retry_after:.0f}s, longer than "
                    f"{policy.max_retry_after:.0f}s; try again later)",
                    transient=failure.error.transient,
                ) from exc
            if attempt >= policy.retries:
                suffix = f" after {attempt} retries; raise LLM_RETRIES or try again later" if attempt else ""
                raise type(failure.error)(f"{failure.error}{suffix}", transient=failure.error.transient) from exc
            wait = policy.delay(attempt, failure.retry_after)
            attempt += 1
            log.warning("%s: %s; retry %d/%d in %.2fs", label, failure.error, attempt, policy.retries, wait)
            await policy.sleep(wait)
