"""What both chat platforms ask of an answer's Markdown before choosing how to lay it out: whether it has structure
(a table, a heading, a list, a code block) that a rich layout shows better than formatted text (Telegram's rich
messages, Discord's components v2)."""

from __future__ import annotations

import re

__all__ = ("has_structure", "sections")

_STRUCTURE = re.compile(
    r"^(#{1,6} \S"  # a heading
    r"|\|.*\|\s*$"  # a table row
    r"|```"  # a code block
    r"|\s*(?:[-*+]|\d+[.)]) \S)",  # a list item
    re.MULTILINE,
)


def has_structure(text: str) -> bool:
    """Whether ``text`` (Markdown) has what only a rich message shows well: a table (two rows or more), a heading,
    a code block, or a list of two items or more."""
    lines = [m.group(0) for m in _STRUCTURE.finditer(text)]
    tables = sum(1 for line in lines if line.startswith("|"))
    items = sum(1 for line in lines if re.match(r"\s*(?:[-*+]|\d+[.)]) ", line))
    others = len(lines) - tables - items
    return tables >= 2 or items >= 2 or others >= 1


def sections(text: str) -> list[str]:
    """``text`` cut before each heading (the first piece may have none); empty pieces are left out."""
    pieces: list[str] = []
    current: list[str] = []
    for line in text.split("\n"):
        if re.match(r"#{1,6} \S", line) and current:
            pieces.append("\n".join(current).strip())
            current = []
        current.append(line)
    pieces.append("\n".join(current).strip())
    return [p for p in pieces if p]
