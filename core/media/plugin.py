"""The media plugin: the attachments of an input (pictures, voice, files) read when the run that takes it starts,
in the process that runs the conversation (a worker, in a fleet): images shown to a model that sees them, voice
heard through speech to text, text files read; the rest stand in as short text. Without it, every attachment is a
stand-in, and nothing is fetched."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..plugin import Plugin
from .attachment import loaded_of
from .reader import READER, MediaReader, attachment_outcome

if TYPE_CHECKING:
    from ..definition_types import ContextState, Setup
    from ..entries import InputRef

__all__ = ("Media",)


class Media(Plugin):
    """Reads the attachments of each input with ``reader`` (its limits, its transcriber; default: the defaults)."""

    name = "media"

    def __init__(self, reader: MediaReader | None = None) -> None:
        self.reader = reader if reader is not None else MediaReader()
        """What is read of attachments, and how; the platforms register their fetchers in it."""
        self._host: Setup | None = None

    def attach(self, host: Setup) -> None:
        self._host = host
        host.provide(READER, self.reader)

    async def prepare(self, state: ContextState[Any], ref: InputRef) -> None:
        host = self._host
        if not ref.attachments or host is None:
            return
        loaded = loaded_of(state.values)
        prepared = await self.reader.prepare(ref.attachments, loaded, vision=host.sees_images)
        if prepared.heard:
            text = ref.data if isinstance(ref.data, str) else ""
            ref.data = f"{text}\n{prepared.heard}" if text.strip() else prepared.heard
        for attachment in ref.attachments:
            host.observe(f"attachment:{attachment.kind.value}:{attachment_outcome(attachment, loaded)}", state.id)
        if prepared.fetched_bytes:
            host.observe("attachment_bytes", state.id, prepared.fetched_bytes)
