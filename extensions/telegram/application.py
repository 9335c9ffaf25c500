"""Building python-telegram-bot's ``Application`` for one token, and checking the token with ``getMe``.

The Application is PTB's client: the ``Bot`` that calls the Bot API (through ``ObservedRequest``, which reports
the status of every answer: 429s to the metrics, a 401 while running to the runtime), its rate limiter
(``RateLimiter``: Telegram's 30 messages a second, 20 a minute per group, "typing" exempt), and, only when PTB's own
``Updater`` receives the updates, that updater. ``initialize`` translates PTB's errors at start into ours, saying
what to fix, without the token (PTB's messages repeat it).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import AIORateLimiter, Application, ApplicationBuilder
from telegram.request import BaseRequest, RequestData

from core import tracing
from core.errors import ConfigError, PlatformError

from .http_client import AiohttpRequest
from .settings import TelegramSettings

__all__ = ("App", "ObservedRequest", "RateLimiter", "build_application", "initialize", "quiet_library_logs")

# Opt in to PTB's coming behaviour (time periods as ``timedelta``, read when an error is built): without
# it PTB warns on every 429, since ``RetryAfter.__init__`` reads its own deprecated attribute.
os.environ.setdefault("PTB_TIMEDELTA", "true")

App = Application[Any, Any, Any, Any, Any, Any]
"""PTB's Application, as this adapter builds it."""


class RateLimiter(AIORateLimiter):
    """PTB's limiter, except for chat actions: "typing" must not use up a group's 20 messages a minute."""

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Any]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Any:
        if endpoint == "sendChatAction":
            return await callback(*args, **kwargs)
        if not tracing.active() or not endpoint.startswith(_POSTS):
            return await super().process_request(callback, args, kwargs, endpoint, data, rate_limit_args)
        with tracing.span(f"telegram {endpoint}", kind="client") as span:  # a post or edit, its retries inside
            span.set_attributes({"messaging.system": "telegram", "messaging.operation.name": endpoint})
            if "chat_id" in data:
                span.set_attribute("bots.chat.id", tracing.ident(data["chat_id"]))
            if tracing.capture_content() and isinstance(data.get("text"), str):
                span.set_attribute("bots.message.text", data["text"])
            attempts = [0]
            token = _attempts.set(attempts)
            try:
                return await super().process_request(callback, args, kwargs, endpoint, data, rate_limit_args)
            finally:
                _attempts.reset(token)
                span.set_attribute("bots.platform.retries", max(0, attempts[0] - 1))


_POSTS = ("send", "edit", "delete")
"""The Bot API methods traced one span each (posts, edits and deletions)."""


class ObservedRequest(AiohttpRequest):
    """PTB's HTTP client for the Bot API (``AiohttpRequest``), telling ``on_status`` the status of every answer: a
    429 for the metrics, a 401 once running (the token was revoked). Only the method name leaves this class: the
    URL holds the token."""

    def __init__(self, on_status: Callable[[int, str], None], **options: Any) -> None:
        super().__init__(**options)
        self._on_status = on_status

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        code, payload = await super().do_request(
            url,
            method,
            request_data=request_data,
            read_timeout=read_timeout,
            write_timeout=write_timeout,
            connect_timeout=connect_timeout,
            pool_timeout=pool_timeout,
        )
        self._on_status(code, url.rpartition("/")[2])
        if tracing.active():  # each attempt's answer on the post's span (429s are followed by retries)
            _answered(code)
        return code, payload


_attempts: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("telegram_attempts", default=None)
"""The answers a traced post has had so far (its retries after a 429 or a network error)."""


def _answered(code: int) -> None:
    attempts = _attempts.get()
    if attempts is not None:
        attempts[0] += 1
    span = tracing.current()
    if not span.is_recording():
        return
    span.add_event("telegram.response", {"http.response.status_code": code})
    span.set_attribute("http.response.status_code", code)
    if code == 429:
        span.set_attribute("bots.platform.rate_limited", True)


def build_application(
    settings: TelegramSettings, token: str, *, on_status: Callable[[int, str], None], updater: bool
) -> App:
    """The Application for ``token``: the Bot API at ``TELEGRAM_API_URL``, the rate limiter, the timeouts; PTB's
    ``Updater`` only with ``updater`` (else updates come from ``Poller`` or ``WebhookServer``, or none)."""
    timeout = settings.request_timeout
    verify = httpx.create_ssl_context()  # httpx's default (certifi, or SSL_CERT_FILE / SSL_CERT_DIR), made once:
    # loading the certificates costs some 30 ms of CPU, and each client would load them again

    def request(pool_size: int) -> ObservedRequest:
        return ObservedRequest(
            on_status,
            connection_pool_size=pool_size,  # PTB's own sizes: 256 for requests, 1 for getUpdates
            connect_timeout=timeout,
            read_timeout=timeout,
            write_timeout=timeout,
            pool_timeout=timeout,
            ssl_context=verify,
        )

    builder = (
        ApplicationBuilder()
        .token(token)
        .base_url(settings.base_url)
        .base_file_url(settings.base_file_url)
        .rate_limiter(
            RateLimiter(
                overall_max_rate=settings.rate_limit,
                group_max_rate=settings.group_rate_limit,
                max_retries=settings.max_retries,
            )
        )
        .request(request(256))
        .get_updates_request(request(1))
        .job_queue(None)
    )
    if not updater:
        builder = builder.updater(None)
    return builder.build()


async def initialize(app: App, settings: TelegramSettings) -> None:
    """Initialise ``app`` (``getMe``: checks the token); raise a ``ConfigError`` or ``PlatformError`` that says
    what to fix, after closing its HTTP clients."""
    failure: Exception | None = None
    try:
        await app.initialize()
    except InvalidToken:
        # PTB's message repeats the token, so the error is built here without it (and without chaining)
        failure = ConfigError(
            f"Telegram rejected TELEGRAM_TOKEN (the Bot API at {settings.api_url} answered "
            "Unauthorized): set TELEGRAM_TOKEN to the token @BotFather gave you"
        )
    except NetworkError as exc:
        failure = PlatformError(
            f"could not reach the Telegram Bot API at {settings.api_url} ({exc.message}); check "
            "TELEGRAM_API_URL and the network"
        )
        failure.__cause__ = exc
    except TelegramError as exc:
        failure = PlatformError(f"Telegram refused to start the bot: {exc.message}")
        failure.__cause__ = exc
    if failure is not None:
        with contextlib.suppress(Exception):  # PTB leaves the HTTP clients of a failed initialize open
            await app.bot.shutdown()
        raise failure


class _ReportedInvalidToken(logging.Filter):
    """Drops PTB's traceback for a token Telegram refused: the runtime reports that itself, as one line
    that names TELEGRAM_TOKEN (at start, or through ``fail`` while running)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], InvalidToken))


def quiet_library_logs() -> None:
    """httpx logs every request URL at INFO, and Bot API URLs contain the token: keep those out of logs.
    PTB's polling loop logs a traceback when the token is refused: the runtime says it better."""
    httpx_log = logging.getLogger("httpx")
    if httpx_log.getEffectiveLevel() < logging.WARNING:
        httpx_log.setLevel(logging.WARNING)
    ptb_log = logging.getLogger("telegram.ext")
    if not any(isinstance(f, _ReportedInvalidToken) for f in ptb_log.filters):
        ptb_log.addFilter(_ReportedInvalidToken())
