"""Text that is not valid Unicode, repaired where it enters: a lone surrogate becomes U+FFFD.

Python strings may hold code points that no encoding can write: a lone surrogate (``"\\ud800"``), which a JSON
escape, a platform library or ``surrogateescape`` decoding hands over as easily as any letter. Such a string breaks
whatever encodes it next (the model client's request body, the SQLite history, the JSON of working memory), and with
it the run of every message batched alongside. So each log entry and history row repairs its strings as it is made,
and the model's stream is repaired chunk by chunk: nothing past the edge ever sees one.

A surrogate pair written as two code points (``"\\ud83d\\ude00"``) is joined into the character it stands for; only
the lone halves are replaced.
"""

from __future__ import annotations

from typing import Any

__all__ = ("repair_strings", "repair_text")


def repair_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (``text`` itself when it is valid, the common case)."""
    if text.isascii():  # (most text: one pass in C, nothing to repair)
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _broken(value: Any) -> bool:
    """True when a string inside ``value`` needs repair (nothing is built to find out; plain loops, as this runs for
    every log entry made)."""
    kind = type(value)
    if kind is str:
        return not value.isascii() and repair_text(value) is not value
    if kind is dict:
        for key, item in value.items():
            if (type(key) is not str or not key.isascii()) and _broken(key):
                return True
            if type(item) is str:
                if not item.isascii() and repair_text(item) is not item:
                    return True
            elif item is not None and _broken(item):
                return True
        return False
    if kind is list or kind is tuple:
        return any(map(_broken, value))
    if isinstance(value, str):  # a subclass (a str enum's value)
        return not value.isascii() and repair_text(value) is not value
    if isinstance(value, dict):
        return _broken(dict(value))
    if isinstance(value, list | tuple):
        return any(map(_broken, value))
    return False


def repair_strings(value: Any) -> Any:
    """``value`` with ``repair_text`` applied to every string inside it (dict keys and values, list and tuple items);
    the same object when nothing needed repair (found without copying anything), other values as they are."""
    if isinstance(value, str):
        return repair_text(value)
    if not _broken(value):
        return value
    if isinstance(value, dict):
        return {repair_strings(k): repair_strings(v) for k, v in value.items()}
    items = [repair_strings(v) for v in value]
    return items if isinstance(value, list) else tuple(items)
