"""Discord's components v2 (the ``IS_COMPONENTS_V2`` message flag): an answer with structure (a table, headings, a
list, a code block), posted whole, is laid out as a container of text displays, one per section (cut before each
heading), with a separator between them, instead of plain message content; Discord's Markdown has no tables, so a
table's rows go in a code block, aligned. Where Discord refuses it (400), the answer is posted as plain messages, as
before. ``DISCORD_COMPONENTS_V2=false`` always posts as before. An answer shown while it is written (or posted by a
fleet's worker, following the run's reply ledger) is edited into the layout once complete, when it is one message
(``Poster.lay_out``).
"""

from __future__ import annotations

import re

from ..chat.structure import has_structure, sections
from ._lib import discord

__all__ = ("LAYOUT_LIMIT", "layout_of")

LAYOUT_LIMIT = 4000
"""The most text a components v2 message holds (Discord's limit over all its text displays)."""


def _tables_as_code(text: str) -> str:
    """Markdown table rows (``| a | b |``, with their ``|---|`` rule) as an aligned code block."""
    out: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if not rows:
            return
        widths = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(max(map(len, rows)))]
        out.append("```")
        out.extend("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows)
        out.append("```")
        rows.clear()

    for line in text.split("\n"):
        if re.fullmatch(r"\s*\|.*\|\s*", line):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-{2,}:?", cell) for cell in cells):
                rows.append(cells)
            continue
        flush()
        out.append(line)
    flush()
    return "\n".join(out)


def layout_of(text: str) -> discord.ui.LayoutView | None:
    """The components v2 layout of ``text``, or ``None`` when it has no structure or is too long for one message."""
    if not has_structure(text):
        return None
    parts = [_tables_as_code(part) for part in sections(text)]
    if not parts or sum(len(p) for p in parts) > LAYOUT_LIMIT:
        return None
    container: discord.ui.Container[discord.ui.LayoutView] = discord.ui.Container()
    for index, part in enumerate(parts):
        if index:
            container.add_item(discord.ui.Separator())
        container.add_item(discord.ui.TextDisplay(part))
    view = discord.ui.LayoutView(timeout=None)
    view.add_item(container)
    return view
