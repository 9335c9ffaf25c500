"""Logging setup: text or JSON lines with the correlation id, secrets masked, message text opt-in.

- ``LOG_FORMAT=json`` writes one JSON object per line: ``ts``, ``level``, ``logger``, ``message``,
  ``correlation_id`` (the incoming message's id, see ``core.trace``), ``trace_id`` and ``span_id`` while tracing
  (``TRACING_ENABLED``: the span the line was written in), any ``extra={...}`` fields and ``exception``. Text lines
  end their first line with ``[cid=...]`` and, while tracing, ``[trace=... span=...]``.
- Every secret of the settings (tokens, keys, passwords in URLs) is replaced by ``********`` in every line,
  tracebacks included, whatever logger wrote it.
- Message text is logged only under the ``content`` logger hierarchy (``logging.getLogger("content.telegram")``),
  which is silent unless ``LOG_CONTENT=true``. Everything else logs ids and sizes, never text.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import time
import traceback
import urllib.parse
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr

from core import tracing
from core.trace import correlation_id
from core.url_secrets import query_secrets

from .settings import LogSettings

if TYPE_CHECKING:
    from .settings import Settings

__all__ = (
    "CONTENT_LOGGER",
    "MASK",
    "JsonFormatter",
    "configure_from_settings",
    "configure_logging",
    "correlation_id",
    "secrets_of",
)

MASK = "********"
"""What a secret looks like in logs and in ``bots config``."""

CONTENT_LOGGER = "content"
"""Loggers under this name carry message text; they are silent unless ``LOG_CONTENT=true``."""

_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "correlation_id",
    "trace_ids",
    "taskName",
}


def secrets_of(settings: BaseModel) -> list[str]:
    """Every secret value in ``settings``: ``SecretStr`` fields, and passwords and query secrets (``?api-key=``)
    inside URL values."""
    found: list[str] = []

    def visit(value: Any) -> None:
        if isinstance(value, BaseModel):
            found.extend(secrets_of(value))
        elif isinstance(value, SecretStr):
            secret = value.get_secret_value()
            if secret:
                found.append(secret)
        elif isinstance(value, str) and "://" in value:
            with contextlib.suppress(ValueError):
                password = urllib.parse.urlsplit(value).password
                if password:
                    found.append(password)
            found.extend(query_secrets(value))
        elif isinstance(value, list | tuple):  # MCP servers, with their header and env secrets
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)

    for name in type(settings).model_fields:
        visit(getattr(settings, name))
    # the longest first, so a secret that contains another is masked whole
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


class _CorrelationFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.correlation_id = correlation_id.get()
        record.trace_ids = tracing.current_ids()  # (None at once while tracing is off)
        return True


class _Masking(logging.Formatter):
    """Wraps a formatter and masks the secrets in what it wrote."""

    def __init__(self, inner: logging.Formatter, secrets: Iterable[str]) -> None:
        super().__init__()
        self.inner = inner
        self.secrets = [s for s in secrets if s]

    def format(self, record: logging.LogRecord) -> str:
        text = self.inner.format(record)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        cid = getattr(record, "correlation_id", None)
        if cid:
            entry["correlation_id"] = cid
        ids = getattr(record, "trace_ids", None)
        if ids:
            entry["trace_id"], entry["span_id"] = ids
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and not key.startswith("_") and key not in entry:
                entry[key] = value if isinstance(value, str | int | float | bool | None) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


_BREAKS = re.compile(r"[\x00-\x08\r\n\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")
"""What would start a new line (or restyle a terminal) in a text log, every control character but the tab: written
as escapes."""


def _one_line(text: str) -> str:
    """``text`` with its line breaks and terminal escapes written as ``\\n``, ``\\x1b``..."""
    return _BREAKS.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)


class _TextFormatter(logging.Formatter):
    """One line per record (what was logged cannot start a line that looks like another record); a traceback
    follows on its own lines."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = _one_line(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        """The traceback, with what each exception of the chain says on one line (its text may quote a user's)."""
        top = traceback.TracebackException(*ei)
        text = "".join(top.format())
        chain: list[traceback.TracebackException | None] = [top]
        seen: set[int] = set()
        while chain:
            found = chain.pop()
            if found is None or id(found) in seen:
                continue
            seen.add(id(found))
            said = "".join(found.format_exception_only())
            text = text.replace(said, _one_line(said.rstrip("\n")) + "\n")
            chain += [found.__cause__, found.__context__]
        return text.rstrip("\n")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        cid = getattr(record, "correlation_id", None)
        ids = getattr(record, "trace_ids", None)
        if cid or ids:
            first, sep, rest = text.partition("\n")
            tags = f" [cid={cid}]" if cid else ""
            if ids:
                tags += f" [trace={ids[0]} span={ids[1]}]"
            text = f"{first}{tags}{sep}{rest}"
        return text


def configure_logging(
    settings: LogSettings, *, secrets: Iterable[str] = (), stream: IO[str] | None = None
) -> logging.Handler:
    """Configure the root logger from ``LOG_*``; ``secrets`` are masked in every line. Returns the handler."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(_CorrelationFilter())
    inner: logging.Formatter = JsonFormatter() if settings.format == "json" else _TextFormatter()
    handler.setFormatter(_Masking(inner, secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level.upper())
    for noisy in ("httpx", "httpx2", "httpcore", "mcp", "discord.gateway", "telegram.ext", "arq.worker"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # message text: only when the operator asked for it
    logging.getLogger(CONTENT_LOGGER).setLevel(logging.NOTSET if settings.content else logging.CRITICAL + 1)
    return handler


def configure_from_settings(settings: Settings, *, stream: IO[str] | None = None) -> logging.Handler:
    """``configure_logging`` with every secret of ``settings`` masked."""
    return configure_logging(settings.log, secrets=secrets_of(settings), stream=stream)
