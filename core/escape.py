"""The trust boundary of the prompt: text that our code did not write is escaped where it enters the prompt.

Only our code writes protocol tags (``<input>``, ``<action_result>``, ``<output>``...). Everything else (what users
write, platform names, action results and errors, state values, memory facts, tool descriptions) goes through
``escape_text`` (element content) or ``escape_attr`` (a double-quoted attribute value), so it can neither open nor
close an element: ``<`` and ``>`` become ``&lt;`` and ``&gt;``, and ``&`` becomes ``&amp;`` so that text which
already looks like an entity comes back exactly as written. The model still reads the text.

The other direction is the parser's: it decodes these entities in what the model writes inside an element
(``core.parser.unescape_text``), so a reply in which the model copies ``&lt;b&gt;`` from the prompt reaches the user as
``<b>``, the text they wrote.
"""

from __future__ import annotations

__all__ = ("escape_attr", "escape_text")

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ATTR_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


def escape_text(text: str) -> str:
    """``text`` made safe as element content of the prompt: ``&``, ``<`` and ``>`` as entities."""
    if "&" not in text and "<" not in text and ">" not in text:
        return text
    return text.translate(_ESCAPES)


def escape_attr(text: str) -> str:
    """``text`` made safe as a double-quoted attribute value of the prompt (``escape_text`` and ``"``)."""
    if "&" not in text and "<" not in text and ">" not in text and '"' not in text:
        return text  # (most values: a scan in C, against ``translate``'s look-up of every character)
    return text.translate(_ATTR_ESCAPES)
