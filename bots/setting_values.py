"""How the values of settings written in the environment are read, for every settings model of ``bots``: lists of
names (comma-separated, or a JSON list where a name cannot start with ``[``)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ("comma_separated", "names")


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
