"""What the bot heard in a voice message, quoted back to the user before it answers (``STT_ECHO=true``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.entries import InputRef
from core.media.reader import READER

if TYPE_CHECKING:
    from core import Host

__all__ = ("echoes_heard", "heard_quote")

QUOTE_CHARS = 300
"""A longer transcript is cut in the quote (the model still reads all of it)."""


def heard_quote(ref: InputRef, *, limit: int = QUOTE_CHARS) -> str | None:
    """``🎤 "what was said"`` for the transcripts of ``ref``'s voice messages, or None when nothing was heard."""
    heard = " ".join(a.text for a in ref.attachments if a.text)
    if not heard:
        return None
    if len(heard) > limit:
        heard = heard[: limit - 1].rstrip() + "…"
    return f'🎤 "{heard}"'


def echoes_heard(agent: Host) -> bool:
    """Whether what was heard is quoted back (``STT_ECHO``, read by the ``Media`` plugin's reader,
    ``provided(READER)``; without it nothing is heard)."""
    reader = agent.provided(READER)
    return reader is not None and reader.echo
