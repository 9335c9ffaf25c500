"""Logging setup: text or JSON lines, with a correlation id when one is set."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time

from .settings import LogSettings

__all__ = ("configure_logging", "correlation_id")

correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("correlation_id", default=None)
"""The id of the message being handled, carried from the incoming message to the reply."""


class _CorrelationFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.correlation_id = correlation_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        cid = getattr(record, "correlation_id", None)
        if cid:
            entry["correlation_id"] = cid
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(settings: LogSettings) -> None:
    """Configure the root logger from ``LOG_*``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_CorrelationFilter())
    if settings.format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level.upper())
    for noisy in ("httpx", "httpcore", "discord.gateway", "telegram.ext", "arq.worker"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
