"""How the values of settings written in the environment are read, for every settings model of ``bots``: lists of
names (comma-separated, or a JSON list where a name cannot start with ``[``), and lists of entries written as JSON."""

from __future__ import annotations

import json
from typing import Any

__all__ = ("comma_separated", "json_list", "names")


def comma_separated(value: Any) -> Any:
    """``a, b,,c`` -> ``["a", "b", "c"]``; anything but a string as it is (pydantic checks it)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def names(value: Any) -> Any:
    """``comma_separated``, or a JSON list when the text starts with ``[``."""
    if isinstance(value, str) and value.strip().startswith("["):
        return json.loads(value.strip())
    return comma_separated(value)


def json_list(value: Any, *, setting: str, example: str, what: str) -> tuple[Any, ...]:
    """A setting holding a JSON list of entries (``BOT_SCHEDULES``, ``WEBHOOKS_SOURCES``) as the environment gives
    it: empty -> ``()``; ``ValueError`` naming ``setting`` with ``example`` of the form when it is not JSON, and
    saying it must be a list of ``what`` when it is JSON of another kind."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{setting} is not JSON ({exc}); write a list such as {example}") from None
    if not isinstance(value, list | tuple):
        raise ValueError(f"{setting} must be a JSON list of {what}")
    return tuple(value)
