"""The one exception tree of the project.

Mistakes by the bot author are kept apart from failures at run time::

    BotError
    ├── DefinitionError          a bad definition (action, output, context, extension); fix the code
    ├── ConfigError              a bad or missing setting; the message names the variable to fix
    └── RunError                 something failed while the bot was running
        ├── ModelError           the model provider failed (network, auth, rate limit, bad answer)
        │   └── ModelAuthError   the provider refused the API key
        ├── PlatformError        Discord / Telegram refused or failed a request
        │   └── ChatGoneError    the bot may no longer post there (removed, blocked, no access)
        ├── ValidationError      arguments, content or attributes broke their schema
        │   └── ScheduleLimitError  a conversation or a user has as many schedules as allowed
        ├── TemplateError        a ``{{...}}`` template could not be resolved
        ├── ActionError          an action handler raised or timed out
        ├── NotAllowedError      the person asking may not do this here (Stop an answer that is not for them)
        ├── DispatchError        the queue layer failed (Redis down, lease lost)
        │   └── BackpressureError  a context's inbox is full; retry later
        └── MemoryStoreError     the memory store failed

Library exceptions (``discord.HTTPException``, ``telegram.error.*``, ``redis.exceptions.*``,
``openai.APIError``) are translated where they happen with ``raise OurError(...) from exc``; they never
reach ``core``'s callers.
"""

from __future__ import annotations

import errno
import socket

__all__ = (
    "ActionError",
    "BackpressureError",
    "BotError",
    "ChatGoneError",
    "ConfigError",
    "DefinitionError",
    "DispatchError",
    "MemoryStoreError",
    "ModelAuthError",
    "ModelError",
    "NotAllowedError",
    "PlatformError",
    "RunError",
    "ScheduleLimitError",
    "TemplateError",
    "ValidationError",
    "address_in_use",
    "cannot_listen",
)


class BotError(Exception):
    """Base of every error this project raises on purpose."""


class DefinitionError(BotError):
    """A definition written by the bot author is wrong (duplicate name, bad schema, missing handler)."""


class ConfigError(BotError):
    """A setting is missing or wrong; the message names the environment variable to fix."""


class RunError(BotError):
    """Something failed while the bot was running."""


class ModelError(RunError):
    """The model provider failed: network, timeout, rate limit, server error or an unusable answer."""

    def __init__(self, *args: object, transient: bool = False) -> None:
        super().__init__(*args)
        self.transient = transient
        """The failure may pass and another model may answer now: a timeout, a 429, a 5xx, a refused connection
        or a stream the server broke off (a chain of models, ``core.models.FallbackModel``, asks the next)."""


class ModelAuthError(ModelError):
    """The model provider refused the credentials."""


class PlatformError(RunError):
    """A chat platform refused or failed a request."""


class ChatGoneError(PlatformError):
    """The platform says the bot may no longer post in that conversation: it was removed from the chat or the
    channel, blocked by the user, or lost access to it (Telegram's 403, Discord's Missing Access or Unknown
    Channel). What the conversation had scheduled there is dropped."""


class ValidationError(RunError):
    """Arguments, output content or attributes did not match their schema."""


class ScheduleLimitError(ValidationError):
    """A conversation or a user already has as many active schedules as allowed (``ScheduleStore.add``)."""


class TemplateError(RunError):
    """A ``{{...}}`` template referenced something that does not exist."""


class ActionError(RunError):
    """An action handler raised or exceeded its timeout."""


class NotAllowedError(RunError):
    """The person asking may not do this here: a Stop in a group by someone the answer is not for
    (``Host.request_stop(..., by=...)``); the platform tells them, nothing was changed."""


class DispatchError(RunError):
    """The dispatcher (queue layer) failed."""


class BackpressureError(DispatchError):
    """A context's inbox is full: the input was refused and nothing was stored; retry later."""

    def __init__(self, message: str, *, wait: float = 0.0) -> None:
        super().__init__(message)
        self.wait = wait
        """Seconds a listener may keep the input and try again before dropping it (``REDIS_INBOX_FULL=wait``
        and ``REDIS_INBOX_WAIT``); 0: drop it now (``REDIS_INBOX_FULL=drop``)."""


class MemoryStoreError(RunError):
    """The memory store failed to read or write."""


def address_in_use(exc: OSError) -> bool:
    """``exc`` (from starting a server) says another process listens on that port."""
    return exc.errno == errno.EADDRINUSE


def cannot_listen(exc: OSError, *, host_var: str, host: str, port_var: str, port: int) -> ConfigError:
    """The error of a server that cannot listen on ``host:port`` (``exc``), naming the setting to fix: the
    address when it is not one of this machine's (or not a name that resolves), else the port."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return ConfigError(
            f"{host_var}={host}: cannot listen on this address ({reason}); give one of this machine's addresses "
            "(127.0.0.1: this machine only; 0.0.0.0: every interface)"
        )
    return ConfigError(
        f"{port_var}={port}: cannot listen on {host}:{port} ({reason}); choose a free port, or {port_var}=0 to "
        "turn it off"
    )
