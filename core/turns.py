"""Where a model's turn ends: cut the dialogue a small model goes on to invent, and stray protocol characters.

A small chat model given a conversation often answers, then writes ``user: ...`` and answers that too, or
starts its reply with a ``>`` left over from the response format. ``TurnGuard`` filters the streamed reply:
it drops a leading speaker label (``you: Hello`` shows ``Hello``) and leading ``>`` or ``:``, and ends the reply
at a line that starts a new turn (``user:``, ``assistant:``, a speaker's name followed by ``:``) or at a chat
template's end-of-turn token written as text. Text that may still turn out to be such a marker is held back
until it is decided, so nothing invented is ever shown, even while streaming.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ("SPEAKER_LABELS", "TURN_STOPS", "TurnGuard", "cut_turns")

SPEAKER_LABELS = frozenset(
    {"user", "you", "assistant", "bot", "human", "system", "model", "ai", "me", "question", "answer", "q", "a"}
)
"""Labels (lower case) that start a turn when a line begins with them and a colon."""

TURN_STOPS = ("\nuser:", "\nUser:", "\nyou:", "\nassistant:", "\nAssistant:", "\nYou:", "\nHuman:", "\nBot:")
"""Stop strings a provider can end the generation at (OpenAI honours the first four); ``TurnGuard`` cuts the rest."""

_TOKENS = (
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end|>",
    "<|user|>",
    "<|assistant|>",
    "<end_of_turn>",
    "<start_of_turn>",
    "</s>",
    "</response",
    "</output",
    "<response",
    "<output",
    "<reasoning",
)
"""Chat template tokens and response-format tags: the reply ends where one appears."""
_LABEL = re.compile(r"[ \t]*[*_]{0,2}([^\W\d_][\w .'-]{0,31}?)[*_]{0,2}[ \t]*:(?!//)")
"""``Name:`` at the start of a line (up to 32 characters, optionally in bold)."""
_WAITING = re.compile(r"[*_ \t]*")
"""What may come between a label and its colon."""
_LEAD = " \t\r\n>:"
"""Characters dropped at the start of a reply."""


class TurnGuard:
    """A streaming filter of one reply; ``feed`` returns what is safe to show, ``close`` the rest.

    ``names`` are the speakers of the conversation (a line ``Ada: ...`` starts a turn too)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.labels = SPEAKER_LABELS | {n.strip().lower() for n in names if n and n.strip()}
        """Labels that start a turn (lower case)."""
        self.cut = False
        """True once the reply was ended at an invented turn or an end-of-turn token."""
        self._buf = ""
        self._line_start = True
        self._first = True

    def feed(self, text: str) -> str:
        """Add streamed text; returns the part that can be shown now."""
        if self.cut:
            return ""
        self._buf += text
        return self._drain(final=False)

    def close(self) -> str:
        """The held-back text, once the stream has ended."""
        if self.cut:
            return ""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> str:
        out: list[str] = []
        while self._buf and not self.cut:
            if self._first:
                self._buf = self._buf.lstrip(_LEAD)
                if not self._buf:
                    break
            if self._line_start:
                decided = self._line_head(final=final)
                if not decided:
                    break
                continue
            piece = self._until_newline(final=final)
            if piece is None:
                break
            out.append(piece)
        return "".join(out)

    def _line_head(self, *, final: bool) -> bool:
        """Decide whether the held line starts a turn; False when more text is needed."""
        match = _LABEL.match(self._buf)
        if match is not None:
            if match.group(1).strip().lower() in self.labels:
                if self._first:  # "you: Hello" -> "Hello"
                    self._buf = self._buf[match.end() :]
                    return True
                self.cut = True
                self._buf = ""
                return True
        elif not final and self._may_be_label(self._buf):
            return False  # may still become "user:"
        self._line_start = False
        self._first = False
        return True

    def _may_be_label(self, text: str) -> bool:
        """True while ``text`` is the start of one of the labels, or a label still waiting for its colon."""
        head = text.lstrip(" \t*_").lower()
        for label in self.labels:
            if label.startswith(head):
                return True
            if head.startswith(label) and _WAITING.fullmatch(head[len(label) :]):
                return True
        return False

    def _until_newline(self, *, final: bool) -> str | None:
        """The text up to the next newline or end-of-turn token; None when the rest must wait."""
        buf = self._buf
        end = buf.find("\n")
        limit = len(buf) if end < 0 else end + 1
        token = min((i for i in (buf.find(t, 0, limit + 16) for t in _TOKENS) if i >= 0), default=-1)
        if 0 <= token < limit:
            self.cut = True
            self._buf = ""
            return buf[:token]
        if end >= 0:
            self._buf = buf[limit:]
            self._line_start = True
            return buf[:limit]
        if final:
            self._buf = ""
            return buf
        keep = _partial_token(buf)
        if keep == len(buf):
            return None
        self._buf = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep]


def _partial_token(text: str) -> int:
    """How many characters at the end of ``text`` may be the start of an end-of-turn token."""
    start = text.rfind("<", max(0, len(text) - 16))
    if start < 0:
        return 0
    tail = text[start:]
    return len(tail) if any(t.startswith(tail) for t in _TOKENS) else 0


def cut_turns(text: str, names: Iterable[str] = ()) -> str:
    """``text`` as ``TurnGuard`` shows it, whole."""
    guard = TurnGuard(names)
    return guard.feed(text) + guard.close()
