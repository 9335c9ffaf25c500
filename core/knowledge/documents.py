"""Reading a document into passages: its text by kind (plain text, Markdown, HTML, PDF), then split by section.

Markdown and HTML are split at their headings (a passage knows the headings it sits under: ``Refunds > Timing``);
a PDF by page; plain text by its Markdown-style headings where it has some. A section longer than ``MAX_CHARS`` is
cut at paragraph breaks (a paragraph longer than that at sentence or word breaks). HTML is read with the standard
library's parser (scripts, styles and navigation left out); PDF with ``pypdf`` (the ``knowledge`` extra).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePosixPath

from ..errors import RunError
from .model import Passage

__all__ = ("KINDS", "MAX_CHARS", "Parsed", "kind_of", "parse_document", "split_markdown")

MAX_CHARS = 1200
"""A passage's length at most, in characters (about 300 tokens)."""

KINDS = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
"""The file names read, by ending, and the kind each is."""

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(kw_only=True, frozen=True, slots=True)
class Parsed:
    """A document read."""

    title: str
    """Its first top heading (else its first heading, else its file name)."""
    passages: list[Passage]
    """Its passages, in order."""


def kind_of(name: str, content_type: str | None = None) -> str | None:
    """The kind of a document from its name (or the ``Content-Type`` a server gave), None if not one read."""
    if content_type:
        media = content_type.split(";", 1)[0].strip().lower()
        found = {
            "text/html": "html",
            "application/xhtml+xml": "html",
            "application/pdf": "pdf",
            "text/markdown": "markdown",
            "text/plain": "text",
        }.get(media)
        if found is not None and not (found == "text" and PurePosixPath(name).suffix.lower() in KINDS):
            return found
    return KINDS.get(PurePosixPath(name).suffix.lower())


def parse_document(data: bytes, *, name: str, kind: str) -> Parsed:
    """The passages of a document of ``kind`` (``kind_of``); ``RunError`` when it cannot be read."""
    fallback = PurePosixPath(name.rstrip("/")).name or name
    if kind == "pdf":
        pages = _pdf_pages(data, name)
        passages = [p for number, text in pages for p in _pieces(f"page {number}", text)]
        return Parsed(title=fallback, passages=passages)
    text = data.decode("utf-8", errors="replace")
    if kind == "html":
        text, title = _html_markdown(text)
        fallback = title or fallback
    return split_markdown(text, title=fallback)


def split_markdown(text: str, *, title: str) -> Parsed:
    """Markdown (or plain text) split at its headings; the document's title is its first top heading."""
    passages: list[Passage] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    found_title = ""
    fenced = False

    def flush() -> None:
        body = "\n".join(lines).strip()
        lines.clear()
        if body:
            shown = [h for level, h in path if not (level == 1 and h == found_title)]  # the title is cited apart
            passages.extend(_pieces(" > ".join(shown), body))

    for line in text.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading is None:
            lines.append(line)
            continue
        flush()
        level, name = len(heading.group(1)), heading.group(2).strip()
        if not found_title and (level == 1 or not path):
            found_title = name
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, name))
    flush()
    return Parsed(title=found_title or title, passages=passages)


def _pieces(section: str, body: str) -> list[Passage]:
    """``body`` in passages of at most ``MAX_CHARS``, cut at paragraphs, then sentences, then words."""
    body = body.strip()
    if len(body) <= MAX_CHARS:
        return [Passage(section=section, text=body)] if body else []
    parts: list[str] = []
    for paragraph in re.split(r"\n\s*\n", body):
        paragraph = paragraph.strip()
        if len(paragraph) <= MAX_CHARS:
            parts.append(paragraph)
            continue
        for sentence in _SENTENCE.split(paragraph):
            while len(sentence) > MAX_CHARS:
                cut = sentence.rfind(" ", 0, MAX_CHARS)
                cut = cut if cut > 0 else MAX_CHARS
                parts.append(sentence[:cut])
                sentence = sentence[cut:].strip()
            parts.append(sentence)
    found: list[Passage] = []
    current = ""
    for part in filter(None, parts):
        if current and len(current) + 2 + len(part) > MAX_CHARS:
            found.append(Passage(section=section, text=current))
            current = part
        else:
            current = f"{current}\n\n{part}" if current else part
    if current:
        found.append(Passage(section=section, text=current))
    return found


def _pdf_pages(data: bytes, name: str) -> list[tuple[int, str]]:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        raise RunError(
            f"{name} is a PDF: install the knowledge extra (pip install 'daydreams-bots[knowledge]')"
        ) from None
    try:
        reader = PdfReader(io.BytesIO(data))
        return [(number, page.extract_text() or "") for number, page in enumerate(reader.pages, start=1)]
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise RunError(f"{name}: the PDF cannot be read ({type(exc).__name__}: {exc})") from exc


_SKIPPED = frozenset({"script", "style", "nav", "header", "footer", "noscript", "template", "svg", "head"})
_BLOCKS = frozenset({"p", "div", "li", "tr", "br", "section", "article", "pre", "blockquote", "dd", "dt", "table"})


class _Text(HTMLParser):
    """An HTML page as Markdown-like text: its headings as ``#`` lines, its blocks as paragraphs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456" and not self._skip:
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in _BLOCKS and not self._skip:
            self.out.append("\n\n" if tag != "br" else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif len(tag) == 2 and tag[0] == "h" and tag[1] in "123456" and not self._skip:
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.out.append(re.sub(r"\s+", " ", data))


def _html_markdown(page: str) -> tuple[str, str]:
    parser = _Text()
    parser.feed(page)
    parser.close()
    lines = [line.strip() for line in "".join(parser.out).split("\n")]
    return "\n".join(lines), parser.title.strip()
