"""Discord's components v2 (the ``IS_COMPONENTS_V2`` message flag): an answer with structure (a table, headings, a
list, a code block), posted whole, is laid out as a container of text displays, one per section (cut before each
heading), with a separator between them, instead of plain message content; Discord's Markdown has no tables, so a
table's rows go in a code block, aligned. Where Discord refuses it (400), the answer is posted as plain messages, as
before. ``DISCORD_COMPONENTS_V2=false`` always posts as before. An answer shown while it is written (or posted by a
fleet's worker, following the run's reply ledger) is edited into the layout once complete, when it is one message
(``Poster.lay_out``).

A picture the bot posts is laid out too (``picture_layout``): a container holding a media gallery (the picture,
attached to the same message and named by its ``attachment://`` address) and its caption in a text display; where
Discord refuses it, the picture is posted as a file with its caption, as before (``Poster.post_media``).
"""

from __future__ import annotations

import re

from ..chat.structure import has_structure, sections
from ._lib import discord

__all__ = ("CAPTION_LIMIT", "LAYOUT_LIMIT", "layout_of", "picture_layout")

LAYOUT_LIMIT = 4000
"""The most text a components v2 message holds (Discord's limit over all its text displays)."""
CAPTION_LIMIT = 1024
"""The most text of a media gallery item's description (its alternative text)."""


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


def picture_layout(filename: str, caption: str) -> discord.ui.LayoutView:
    """The components v2 layout of a picture posted as the file ``filename``: a container holding a media gallery of
    that file (``caption`` as its alternative text) and ``caption``, when there is one, in a text display."""
    item = discord.MediaGalleryItem(f"attachment://{filename}", description=caption[:CAPTION_LIMIT] or None)
    container: discord.ui.Container[discord.ui.LayoutView] = discord.ui.Container()
    container.add_item(discord.ui.MediaGallery(item))
    if caption:
        container.add_item(discord.ui.TextDisplay(caption[:LAYOUT_LIMIT]))
    view = discord.ui.LayoutView(timeout=None)
    view.add_item(container)
    return view
