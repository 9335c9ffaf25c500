"""An incremental, forgiving parser for the model's ``<response>`` XML.

``feed(chunk)`` returns the events the chunk completed; ``close()`` flushes the rest. Tags may be cut
anywhere across chunks. Content elements (``reasoning``, ``action_call``, ``output``) hold raw text up to
their closing tag, so ``<b>`` or ``a < b`` inside a reply stay text; the entities of the prompt in it are
decoded (``unescape_text``, also when cut across chunks), so ``&lt;b&gt;`` copied from the prompt is ``<b>``.
Text outside tags and unknown tags are reported as ``Text``; a stream that ends inside an element closes it
with ``complete=False``.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

__all__ = (
    "CONTAINER_TAGS",
    "CONTENT_TAGS",
    "ParseEvent",
    "StreamParser",
    "TagEnd",
    "TagStart",
    "TagText",
    "Text",
    "parse",
    "unescape_text",
)

CONTENT_TAGS = frozenset({"reasoning", "action_call", "output"})
"""Elements whose content is raw text."""
CONTAINER_TAGS = frozenset({"response"})
"""Elements that only group other elements."""

_NAME = re.compile(r"</?([A-Za-z_][\w:.\-]*)")
_ATTR = re.compile(r"""([^\s=/>"']+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")


@dataclass(slots=True, kw_only=True)
class TagStart:
    """An element opened."""

    name: str
    """Tag name."""
    attrs: dict[str, str] = field(default_factory=dict)
    """Attributes, entity-decoded."""
    index: int
    """Position of the element among the content elements of the stream (containers: -1)."""


@dataclass(slots=True, kw_only=True)
class TagText:
    """More content of the open content element."""

    name: str
    """Tag name."""
    text: str
    """The new text, entities decoded."""
    index: int
    """The element's index."""


@dataclass(slots=True, kw_only=True)
class TagEnd:
    """An element closed (or the stream ended inside it)."""

    name: str
    """Tag name."""
    attrs: dict[str, str] = field(default_factory=dict)
    """Attributes, entity-decoded."""
    content: str = ""
    """The whole content, entities decoded (empty for containers)."""
    index: int
    """The element's index."""
    complete: bool = True
    """False when the stream ended before the closing tag."""


@dataclass(slots=True, kw_only=True)
class Text:
    """Text outside content elements, unknown tags included."""

    text: str
    """The text."""


ParseEvent = TagStart | TagText | TagEnd | Text


def _parse_attrs(inner: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for m in _ATTR.finditer(inner):
        value = m.group(2) if m.group(2) is not None else m.group(3) if m.group(3) is not None else m.group(4)
        attrs[m.group(1)] = html.unescape(value)
    return attrs


_ENTITY = re.compile(r"&(lt|gt|amp|quot|apos|#39|#x27);")
_DECODED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'", "#39": "'", "#x27": "'"}
_ENTITIES = ("&lt;", "&gt;", "&amp;", "&quot;", "&apos;", "&#39;", "&#x27;")
ENTITY_PREFIX_MAX = len("&#x27")
"""The longest text that may be the start of an entity ``unescape_text`` decodes (a streaming decoder holds back a
tail this long that starts with ``&`` until the next chunk says whether it is one)."""


def _decode(m: re.Match[str]) -> str:
    return _DECODED[m.group(1)]


def unescape_text(text: str) -> str:
    """What the model wrote, with the entities of the prompt decoded (``&lt; &gt; &amp; &quot; &apos; &#39;``), in one
    pass: ``&amp;lt;`` becomes ``&lt;``. Other ``&`` text is left as it is."""
    if "&" not in text:
        return text
    return _ENTITY.sub(_decode, text)


def _entity_tail(text: str) -> int:
    """Where a tail of ``text`` that may be the start of an entity begins (``len(text)`` when there is none)."""
    j = text.rfind("&", max(0, len(text) - ENTITY_PREFIX_MAX))
    if j == -1:
        return len(text)
    tail = text[j:]
    return j if any(e.startswith(tail) for e in _ENTITIES) else len(text)


_TAG_BODY = re.compile(r"""(?:[^>"'<]+|"[^"]*"|'[^']*')*""")


def _find_tag_end(buf: str, start: int, limit: int) -> int:
    """Index of the ``>`` closing the tag that starts at ``start``, honouring quotes; -1 if not yet seen,
    -2 if the tag is longer than ``limit``, -3 if another ``<`` comes first (then it was not a tag)."""
    m = _TAG_BODY.match(buf, start + 1, min(len(buf), start + limit))
    assert m is not None  # the pattern matches the empty string
    end = m.end()
    if end < len(buf) and end < start + limit:
        c = buf[end]
        if c == ">":
            return end
        if c == "<":
            return -3
    return -2 if end - start >= limit - 1 else -1


class StreamParser:
    """Incremental decoder: ``feed(chunk) -> list[event]`` and ``close() -> list[event]``."""

    def __init__(
        self,
        *,
        content_tags: frozenset[str] = CONTENT_TAGS,
        container_tags: frozenset[str] = CONTAINER_TAGS,
        max_tag_length: int = 2048,
    ) -> None:
        self._content_tags = content_tags
        self._container_tags = container_tags
        self._max_tag = max_tag_length
        self._buf = ""
        self._open: TagStart | None = None
        self._parts: list[str] = []
        self._held = ""  # the start of an entity cut by the end of a chunk
        self._close_tag = ""
        self._containers: list[str] = []
        self._index = 0
        self._closed = False

    def feed(self, chunk: str) -> list[ParseEvent]:
        """Consume a chunk; return the events it completed."""
        if self._closed:
            raise RuntimeError("feed() after close()")
        if not chunk:
            return []
        if not self._buf and "<" not in chunk:  # the common case mid-element: no markup in sight
            start = self._open
            if start is None:
                return [Text(text=chunk)]
            out: list[ParseEvent] = []
            self._emit_text(chunk, out)
            return out
        buf = self._buf + chunk if self._buf else chunk
        events: list[ParseEvent] = []
        pos = self._scan(buf, events, final=False)
        self._buf = buf[pos:]
        return events

    def close(self) -> list[ParseEvent]:
        """Flush: emit what is buffered and close any element left open."""
        if self._closed:
            return []
        events: list[ParseEvent] = []
        buf = self._buf
        pos = self._scan(buf, events, final=True)
        rest = buf[pos:]
        self._buf = ""
        self._closed = True
        if self._open is not None:
            if rest:
                self._emit_text(rest, events)
            events.append(self._end(complete=False, events=events))
        elif rest:
            events.append(Text(text=rest))
        while self._containers:
            events.append(TagEnd(name=self._containers.pop(), index=-1, complete=False))
        return events

    # -- internals ---------------------------------------------------------------------------------------

    def _emit_text(self, text: str, events: list[ParseEvent], *, hold: bool = True) -> None:
        """Content of the open element, decoded; a tail that may be an entity cut in two waits for more."""
        assert self._open is not None
        if self._held:
            text = self._held + text
            self._held = ""
        if "&" in text:  # the common case, no entity at all, skips both steps
            if hold:
                cut = _entity_tail(text)
                text, self._held = text[:cut], text[cut:]
            text = unescape_text(text)
        if text:
            self._parts.append(text)
            events.append(TagText(name=self._open.name, text=text, index=self._open.index))

    def _end(self, *, complete: bool, events: list[ParseEvent]) -> TagEnd:
        assert self._open is not None
        if self._held:
            self._emit_text("", events, hold=False)
        start = self._open
        self._open = None
        content = "".join(self._parts)
        self._parts = []
        return TagEnd(name=start.name, attrs=start.attrs, content=content, index=start.index, complete=complete)

    def _scan(self, buf: str, events: list[ParseEvent], *, final: bool) -> int:
        pos = 0
        n = len(buf)
        while pos < n:
            if self._open is not None:
                pos = self._scan_content(buf, pos, events, final=final)
                if pos < 0:
                    return -pos - 1
                continue
            i = buf.find("<", pos)
            if i == -1:
                events.append(Text(text=buf[pos:]))
                return n
            if i > pos:
                events.append(Text(text=buf[pos:i]))
            m = _NAME.match(buf, i)
            if m is None:
                if i + 2 > n and not final:  # "<" or "</" at the very end: wait
                    return i
                if buf.startswith("</", i) and i + 2 >= n and not final:
                    return i
                events.append(Text(text="<"))
                pos = i + 1
                continue
            name = m.group(1)
            closing = buf[i + 1] == "/"
            if m.end() == n and not final:
                return i  # the name may go on in the next chunk
            if name not in self._content_tags and name not in self._container_tags:
                events.append(Text(text=buf[i : m.end()]))
                pos = m.end()
                continue
            end = _find_tag_end(buf, i, self._max_tag)
            if end == -1:
                return i  # wait for more; close() turns it into text
            if end < 0:
                events.append(Text(text="<"))
                pos = i + 1
                continue
            inner = buf[m.end() : end]
            self_closing = inner.rstrip().endswith("/")
            if self_closing:
                inner = inner.rstrip()[:-1]
            pos = end + 1
            if name in self._container_tags:
                if closing:
                    if name in self._containers:
                        while self._containers:
                            top = self._containers.pop()
                            events.append(TagEnd(name=top, index=-1))
                            if top == name:
                                break
                    continue
                events.append(TagStart(name=name, attrs=_parse_attrs(inner), index=-1))
                if self_closing:
                    events.append(TagEnd(name=name, index=-1))
                else:
                    self._containers.append(name)
                continue
            if closing:  # a stray closing tag of a content element: ignore it
                continue
            start = TagStart(name=name, attrs=_parse_attrs(inner), index=self._index)
            self._index += 1
            events.append(start)
            self._open = start
            self._close_tag = f"</{name}"
            if self_closing:
                events.append(self._end(complete=True, events=events))
        return pos

    def _scan_content(self, buf: str, pos: int, events: list[ParseEvent], *, final: bool) -> int:
        """Scan inside a content element. Returns the new position, or ``-(pos+1)`` to stop and wait."""
        close = self._close_tag
        n = len(buf)
        search = pos
        while True:
            i = buf.find(close, search)
            if i == -1:
                # keep back a tail that may be the start of the closing tag
                safe = n
                j = buf.rfind("<", max(pos, n - len(close)), n)
                if j != -1 and close.startswith(buf[j:]) and not final:
                    safe = j
                if safe > pos:
                    self._emit_text(buf[pos:safe], events)
                return -(safe + 1) if safe < n else n
            after = i + len(close)
            k = after
            while k < n and buf[k] in " \t\r\n":
                k += 1
            if k == n and final:  # the stream ended right after "</name": take it as the closing tag
                if i > pos:
                    self._emit_text(buf[pos:i], events)
                events.append(self._end(complete=True, events=events))
                return n
            if k == n:
                if n - i > self._max_tag:
                    search = after
                    continue
                if i > pos:
                    self._emit_text(buf[pos:i], events)
                return -(i + 1)
            if buf[k] == ">":
                if i > pos:
                    self._emit_text(buf[pos:i], events)
                events.append(self._end(complete=True, events=events))
                return k + 1
            search = after  # "</outputs" or similar: plain text


def parse(text: str) -> list[ParseEvent]:
    """Parse a whole response at once."""
    p = StreamParser()
    return p.feed(text) + p.close()
