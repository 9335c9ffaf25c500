"""Splitting a long reply into messages a platform accepts, on safe boundaries.

Both chat adapters use this: Discord with 2,000 characters, Telegram with 4,096 measured after rendering.
A cut prefers a paragraph break, then a line break, outside a code block, then the same inside one, then a
space; a code block cut in two is closed at the end of one message and re-opened (with its language) at the
start of the next.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ("split_message",)

_FENCE = "```"


def _fence_state(text: str, start: str | None) -> str | None:
    """The opening line of the code block still open at the end of ``text`` (None if none is open)."""
    state = start
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            state = None if state is not None else stripped
    return state


def _compose(prefix: str | None, body: str, end_state: str | None) -> str:
    text = f"{prefix}\n{body}" if prefix else body
    if end_state is not None:
        text = text.rstrip("\n") + "\n" + _FENCE
    return text


def _cut_outside_code(text: str, start: str | None, floor: int, end: int) -> int | None:
    """The best cut in ``text[floor:end]`` at a line break where no code block is open: after a blank line
    if there is one, else after any line. None when every line break there is inside a code block."""
    state = start
    pos = 0
    line_break: int | None = None
    paragraph: int | None = None
    previous_blank = False
    for line in text[:end].split("\n")[:-1]:
        pos += len(line) + 1
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            state = None if state is not None else stripped
        if state is None and pos >= floor:
            line_break = pos
            if not stripped and not previous_blank:
                paragraph = pos
        previous_blank = not stripped
    return paragraph if paragraph is not None else line_break


def split_message(
    text: str,
    limit: int,
    *,
    measure: Callable[[str], int] = len,
    keep_together: Callable[[str, int], bool] | None = None,
) -> list[str]:
    """Split ``text`` into pieces whose ``measure`` is at most ``limit``.

    ``measure`` lets a platform count what it counts (Telegram: the rendered text). ``keep_together(s, i)``
    says a cut before ``s[i]`` would split one character as users see it (an emoji sequence, an accent);
    a cut with no space to fall back on then moves left. Empty or blank input gives an empty list.
    """
    if limit < 16:
        raise ValueError("limit must be at least 16")
    chunks: list[str] = []
    rest = text
    fence: str | None = None
    while rest.strip():
        whole = _compose(fence, rest, _fence_state(rest, fence))
        if measure(whole) <= limit:
            chunks.append(whole.strip("\n"))
            break
        # the longest prefix of ``rest`` that fits, by binary search on its length
        lo, hi = 1, len(rest)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if measure(_compose(fence, rest[:mid], _fence_state(rest[:mid], fence))) <= limit:
                lo = mid
            else:
                hi = mid - 1
        n = lo
        if keep_together is not None:
            while n > 1 and keep_together(rest, n):
                n -= 1
        cut = n
        floor = n // 2
        outside = _cut_outside_code(rest, fence, floor, n)
        if outside is not None:
            cut = outside
        else:
            for sep in ("\n\n", "\n", " "):
                i = rest.rfind(sep, floor, n)
                if i > 0:
                    cut = i + len(sep)
                    break
        piece = rest[:cut]
        end_state = _fence_state(piece, fence)
        if fence is not None and not piece.strip():
            cut, piece = n, rest[:n]
            end_state = _fence_state(piece, fence)
        chunk = _compose(fence, piece.rstrip("\n ") if end_state is None else piece.rstrip("\n"), end_state)
        if chunk.strip():
            chunks.append(chunk.strip("\n"))
        fence = end_state
        rest = rest[cut:]
        if fence is None:
            rest = rest.lstrip("\n")
    return chunks
