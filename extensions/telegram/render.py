"""The model's Markdown as Telegram HTML, and the length Telegram counts.

Models write Markdown; Telegram's HTML parse mode accepts a small tag set and rejects a message with a tag
left open or an unknown one ("can't parse entities"). The renderer builds a tree first and serialises it, so
every tag it writes is closed, and everything else is escaped. What it does not understand stays text.

Supported: fenced code blocks (```lang), inline code, **bold**, __bold__, *italic*, _italic_, ~~strike~~,
||spoiler||, [links](https://...), # headings (bold), > quotes, "- " lists (bullets). Telegram allows no
formatting entity to contain ``code``, so a code span inside bold text or a link closes them around it.
Importing this needs no python-telegram-bot.
"""

from __future__ import annotations

import bisect
import functools
import html
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from ..chat.split import split_message

__all__ = (
    "MESSAGE_LIMIT",
    "render_html",
    "rendered_length",
    "split_markdown",
    "split_plain",
    "splits_character",
    "utf16_len",
    "visible_length",
    "visible_text",
)

_ESCAPABLE = frozenset("\\`*_{}[]()#+-.!|~>")
_DELIMITERS = ("***", "**", "__", "~~", "||", "*", "_")
_TAGS: dict[str, tuple[str, ...]] = {
    "***": ("b", "i"),
    "**": ("b",),
    "__": ("b",),
    "*": ("i",),
    "_": ("i",),
    "~~": ("s",),
    "||": ("tg-spoiler",),
}
_LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")
_BARE_URL = re.compile(r"(?:https?|tg)://[^\s<>]+")
_FENCE = "```"
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+(.*)$")
_QUOTE = re.compile(r"^ {0,3}>[ \t]?(.*)$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_TAG = re.compile(r"<[^>]*>")
_ESCAPE = re.compile(r"\\[\\`*_{}\[\]()#+\-.!|~>]")
_BACKTICKS = re.compile(r"`+")
_BRACKET = re.compile(r"[\[\]]")
_SPECIAL = re.compile(r"[\\`\[*_~|]")
_EMPTY = re.compile(r'<(b|i|s|tg-spoiler)></\1>|<a href="[^"]*"></a>')
_MAX_DEPTH = 6


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(text: str) -> str:
    return _escape(text).replace('"', "&quot;")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Telegram counts in."""
    return len(text.encode("utf-16-le")) // 2


def visible_text(html_text: str) -> str:
    """The text Telegram shows for HTML written by ``render_html`` (tags removed, entities decoded)."""
    return html.unescape(_TAG.sub("", html_text))


def visible_length(html_text: str) -> int:
    """What Telegram counts against its 4,096 limit for HTML written by ``render_html``."""
    return utf16_len(visible_text(html_text))


# -- inline ------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Node:
    tag: str
    """``b``, ``i``, ``s``, ``tg-spoiler``, ``a`` or ``code``."""
    children: list[_Node | str] = field(default_factory=list)
    href: str = ""


class _Inline:
    """One line of inline Markdown, scanned once so rendering stays linear in practice."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.escaped: set[int] = {m.start() + 1 for m in _ESCAPE.finditer(text)}
        """Positions of characters written after a backslash (taken literally)."""
        self.code: dict[int, tuple[int, int]] = self._code_spans()
        """Start of a code span -> (run length, start of its closing run)."""
        self.urls: dict[int, int] = {}
        """Start of a bare URL -> its end."""
        protected: list[tuple[int, int]] = []
        for start, (run, close) in self.code.items():
            protected.append((start, close + run))
        for m in _BARE_URL.finditer(text):
            if m.start() > 0 and text[m.start() - 1].isalnum():
                continue
            if any(a <= m.start() < b for a, b in protected):
                continue
            self.urls[m.start()] = m.end()
            protected.append((m.start(), m.end()))
        self.protected = sorted(protected)
        self.url_starts = sorted(self.urls)
        self.closers: dict[str, list[int]] = {d: [] for d in _DELIMITERS}
        for d in _DELIMITERS:
            start = 0
            while True:
                j = text.find(d, start)
                if j < 0:
                    break
                start = j + 1
                if self._is_closer(j, d) and not self._inside_protected(j):
                    self.closers[d].append(j)
        self.brackets = self._match_brackets()

    def _code_spans(self) -> dict[int, tuple[int, int]]:
        """Backtick runs paired as CommonMark pairs them: a run closes at the next run of equal length."""
        text = self.text
        runs: list[tuple[int, int]] = []
        for m in _BACKTICKS.finditer(text):
            start = m.start() + 1 if m.start() in self.escaped else m.start()
            if start < m.end():
                runs.append((start, m.end() - start))
        by_length: dict[int, list[int]] = {}
        for k, (_, length) in enumerate(runs):
            by_length.setdefault(length, []).append(k)
        spans: dict[int, tuple[int, int]] = {}
        k = 0
        while k < len(runs):
            pos, length = runs[k]
            same = by_length[length]
            nxt = bisect.bisect_right(same, k)
            if nxt < len(same):
                close = runs[same[nxt]][0]
                spans[pos] = (length, close)
                k = same[nxt] + 1
            else:
                k += 1
        return spans

    def _match_brackets(self) -> dict[int, int]:
        text = self.text
        stack: list[int] = []
        pairs: dict[int, int] = {}
        for m in _BRACKET.finditer(text):
            i, ch = m.start(), m.group()
            if i in self.escaped or self._inside_protected(i):
                continue
            if ch == "[":
                stack.append(i)
            elif ch == "]" and stack:
                pairs[stack.pop()] = i
        return pairs

    def _inside_protected(self, pos: int) -> bool:
        k = bisect.bisect_right(self.protected, (pos, len(self.text) + 1)) - 1
        return k >= 0 and self.protected[k][0] <= pos < self.protected[k][1]

    def _is_closer(self, j: int, d: str) -> bool:
        text = self.text
        if j == 0 or j in self.escaped or text[j - 1].isspace():
            return False
        after = j + len(d)
        if d[0] == "_" and after < len(text) and text[after].isalnum():
            return False
        return not (len(d) == 1 and (text[j - 1] == d or (after < len(text) and text[after] == d)))

    def _is_opener(self, i: int, d: str) -> bool:
        text = self.text
        after = i + len(d)
        if after >= len(text) or text[after].isspace() or i in self.escaped:
            return False
        if d[0] == "_" and i > 0 and text[i - 1].isalnum():
            return False
        return not (len(d) == 1 and text[after] == d)

    def parse(self, start: int, end: int, *, depth: int = 0, in_link: bool = False) -> list[_Node | str]:
        text = self.text
        nodes: list[_Node | str] = []
        plain: list[str] = []

        def flush() -> None:
            if plain:
                nodes.append("".join(plain))
                plain.clear()

        i = start
        while i < end:
            ch = text[i]
            if ch == "\\" and i + 1 < end and i + 1 in self.escaped:
                plain.append(text[i + 1])
                i += 2
                continue
            span = self.code.get(i)
            if span is not None and span[1] + span[0] <= end:
                run, close = span
                body = text[i + run : close]
                if len(body) > 2 and body[0] == " " and body[-1] == " " and body.strip():
                    body = body[1:-1]
                flush()
                nodes.append(_Node("code", [body]))
                i = close + run
                continue
            if ch == "`":
                j = i
                while j < end and text[j] == "`":
                    j += 1
                plain.append(text[i:j])
                i = j
                continue
            url_end = self.urls.get(i)
            if url_end is not None and url_end <= end:
                plain.append(text[i:url_end])
                i = url_end
                continue
            if ch == "[" and not in_link:
                link = self._link(i, end)
                if link is not None:
                    label_end, href, after = link
                    flush()
                    label = self.parse(i + 1, label_end, depth=depth + 1, in_link=True)
                    nodes.append(_Node("a", label or [href], href=href))
                    i = after
                    continue
            if ch in "*_~|" and depth < _MAX_DEPTH:
                matched = self._emphasis(i, end, depth=depth, in_link=in_link)
                if matched is not None:
                    node, after = matched
                    flush()
                    nodes.append(node)
                    i = after
                    continue
                run = 1
                while i + run < end and text[i + run] == ch:
                    run += 1
                plain.append(text[i : i + run])
                i += run
                continue
            m = _SPECIAL.search(text, i + 1, end)
            stop = m.start() if m is not None else end
            k = bisect.bisect_right(self.url_starts, i)
            if k < len(self.url_starts) and self.url_starts[k] < stop:
                stop = self.url_starts[k]
            plain.append(text[i:stop])
            i = stop
        flush()
        return nodes

    def _emphasis(self, i: int, end: int, *, depth: int, in_link: bool) -> tuple[_Node, int] | None:
        text = self.text
        for d in _DELIMITERS:
            if not text.startswith(d, i) or not self._is_opener(i, d):
                continue
            closers = self.closers[d]
            k = bisect.bisect_left(closers, i + len(d) + 1)
            if k >= len(closers) or closers[k] + len(d) > end:
                continue
            close = closers[k]
            inner = self.parse(i + len(d), close, depth=depth + 1, in_link=in_link)
            tags = _TAGS[d]
            node = _Node(tags[-1], inner)
            for tag in reversed(tags[:-1]):
                node = _Node(tag, [node])
            return node, close + len(d)
        return None

    def _link(self, i: int, end: int) -> tuple[int, str, int] | None:
        text = self.text
        close = self.brackets.get(i)
        if close is None or close + 1 >= end or text[close + 1] != "(":
            return None
        j = close + 2
        depth = 0
        limit = min(end, j + 2048)
        while j < limit:
            ch = text[j]
            if ch.isspace():
                return None
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        else:
            return None
        href = text[close + 2 : j].strip("<>")
        if not href.lower().startswith(_LINK_SCHEMES):
            return None
        return close, href, j + 1


def _serialise(nodes: list[_Node | str], out: list[str], stack: list[_Node]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(_escape(node))
        elif node.tag == "code":
            for open_node in reversed(stack):
                out.append(f"</{open_node.tag}>")
            out.append(f"<code>{_escape(''.join(str(c) for c in node.children))}</code>")
            for open_node in stack:
                out.append(_open(open_node))
        elif node.tag != "a" and any(open_node.tag == node.tag for open_node in stack):
            _serialise(node.children, out, stack)  # already bold: no bold inside bold
        else:
            out.append(_open(node))
            stack.append(node)
            _serialise(node.children, out, stack)
            stack.pop()
            out.append(f"</{node.tag}>")


def _open(node: _Node) -> str:
    if node.tag == "a":
        return f'<a href="{_escape_attr(node.href)}">'
    return f"<{node.tag}>"


@functools.lru_cache(maxsize=2048)
def _inline(text: str, *, wrap: str | None = None) -> str:
    """One line rendered; cached, since splitting measures the same lines many times."""
    nodes = _Inline(text).parse(0, len(text))
    if wrap is not None:
        nodes = [_Node(wrap, nodes)]
    out: list[str] = []
    _serialise(nodes, out, [])
    rendered = "".join(out)
    while True:
        cleaned = _EMPTY.sub("", rendered)
        if cleaned == rendered:
            return rendered
        rendered = cleaned


# -- blocks ------------------------------------------------------------------------------------------


def render_html(markdown: str) -> str:
    """Telegram HTML for ``markdown``; every tag written is closed and all other text is escaped."""
    lines = markdown.split("\n")
    out: list[str] = []
    quote: list[str] = []

    def flush_quote() -> None:
        if quote:
            out.append("<blockquote>" + "\n".join(quote) + "</blockquote>")
            quote.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            flush_quote()
            lang = re.sub(r"[^\w+#.-]", "", stripped[len(_FENCE) :].strip().split(" ")[0]) if stripped else ""
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(_FENCE):
                body.append(lines[i])
                i += 1
            i += 1
            code = _escape("\n".join(body))
            if lang:
                out.append(f'<pre><code class="language-{lang}">{code}</code></pre>')
            else:
                out.append(f"<pre>{code}</pre>")
            continue
        i += 1
        m = _QUOTE.match(line)
        if m is not None:
            quote.append(_inline(m.group(1)))
            continue
        flush_quote()
        m = _HEADING.match(line)
        if m is not None:
            out.append(_inline(m.group(1), wrap="b"))
            continue
        if _RULE.match(line):
            out.append("———")  # never longer than the rule it replaces, so rendering never grows text
            continue
        m = _BULLET.match(line)
        if m is not None:
            out.append(f"{m.group(1)}• {_inline(m.group(2))}")
            continue
        out.append(_inline(line))
    flush_quote()
    return "\n".join(out)


def splits_character(text: str, index: int) -> bool:
    """True when a cut before ``text[index]`` would split one user-perceived character (an accent, an
    emoji with a skin tone or ZWJ sequence, a flag)."""
    if index <= 0 or index >= len(text):
        return False
    ch, prev = text[index], text[index - 1]
    if prev == "\u200d" or ch in "\u200d\ufe0e\ufe0f" or 0x1F3FB <= ord(ch) <= 0x1F3FF or 0xE0020 <= ord(ch) <= 0xE007F:
        return True
    if unicodedata.category(ch) in ("Mn", "Me", "Mc"):
        return True
    if _regional(ch) and _regional(prev):
        count = 0
        k = index - 1
        while k >= 0 and _regional(text[k]):
            count += 1
            k -= 1
        return count % 2 == 1
    return False


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


# -- splitting ---------------------------------------------------------------------------------------

MESSAGE_LIMIT = 4096
"""Telegram's limit on a message's text, in UTF-16 code units after entity parsing."""


def rendered_length(markdown: str) -> int:
    """What Telegram counts for ``markdown`` once rendered."""
    return visible_length(render_html(markdown))


def split_markdown(markdown: str, *, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Cut ``markdown`` into pieces that each render within ``limit``; code blocks cut in two are closed
    and re-opened, and no piece ends inside a character."""
    return _split(markdown, limit, rendered_length)


def split_plain(text: str, *, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Cut plain text into pieces of at most ``limit`` UTF-16 code units."""
    return _split(text, limit, utf16_len)


def _split(text: str, limit: int, measure: Callable[[str], int]) -> list[str]:
    chunks: list[str] = []
    for piece in split_message(text, limit, measure=measure, keep_together=splits_character):
        if measure(piece) <= limit:
            chunks.append(piece)
            continue
        # the measure is not monotonic (closing ``**`` shortens the rendered text): cut this one finer
        smaller = limit
        while True:
            smaller = max(16, smaller * 7 // 8)
            parts = split_message(piece, smaller, measure=measure, keep_together=splits_character)
            if all(measure(p) <= limit for p in parts) or smaller == 16:
                chunks.extend(parts)
                break
    return chunks
