"""A finished answer laid out on the web chat's page: its Markdown (headings, lists, tables, code blocks, emphasis,
links) rendered to HTML here, in the process holding the page, the web chat's equivalent of Telegram's rich
messages. While it is written the answer is shown as plain text; once complete the page replaces it with this.

The answer is model output, so untrusted: it is read with markdown-it (CommonMark, tables and strikethrough) with
raw HTML off, so a ``<script>`` or an ``<img onerror>`` in it comes out as text; links go only to ``http``,
``https`` and ``mailto`` addresses (anything else stays text), open in a new tab without the page as referrer;
pictures are not shown (a Markdown image stays a link: the page loads nothing the answer names). A table's column
alignment is a class, not a ``style`` attribute, which the page's Content-Security-Policy refuses.
"""

from __future__ import annotations

from markdown_it import MarkdownIt

__all__ = ("rendered",)

_SCHEMES = ("http://", "https://", "mailto:")
"""The only addresses an answer's link may go to."""
_ALIGN = {"text-align:left": "align-left", "text-align:center": "align-center", "text-align:right": "align-right"}
"""A table cell's alignment (markdown-it's ``style`` attribute), as the class ``web.css`` aligns by."""


class _Markdown(MarkdownIt):
    """markdown-it with the page's rules: no raw HTML, no pictures, links to the web and mail only."""

    def __init__(self) -> None:
        super().__init__("commonmark", {"html": False, "breaks": True})
        self.enable(["strikethrough", "table"])
        self.disable("image")

    def validateLink(self, url: str) -> bool:  # (markdown-it's name)
        return url.strip().lower().startswith(_SCHEMES)


_MARKDOWN = _Markdown()


def rendered(text: str) -> str:
    """The HTML of the answer ``text`` read as Markdown, safe to put in the page (see the module's docstring)."""
    tokens = _MARKDOWN.parse(text)
    for token in tokens:
        if token.type in ("th_open", "td_open") and "style" in token.attrs:
            token.attrs = {"class": _ALIGN.get(str(token.attrs["style"]), "")}
        for child in token.children or ():
            if child.type == "link_open":
                child.attrs.update({"target": "_blank", "rel": "noopener noreferrer nofollow"})
    return str(_MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {}))
