"""Reading attachments when a run starts: limits, fetching with retries, transcription, text files.

``MediaReader.prepare`` runs in the process that runs the context (a queue worker in distributed mode),
for every input of the run. It never raises: whatever cannot be read becomes a short ``note`` the model
sees ("an image of 12 MB was not read"), so a picture can never cost a message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import BotError
from ..slots import Slot
from .attachment import Attachment, AttachmentKind, Loaded, human_size, is_text

__all__ = (
    "READER",
    "Fetcher",
    "MediaLimits",
    "MediaReader",
    "Prepared",
    "Transcriber",
    "attachment_outcome",
    "sniff_image",
)

log = logging.getLogger("core.media")

Fetcher = Callable[[Attachment], Awaitable[bytes]]
"""``await fetch(attachment)``: the bytes of an attachment from its platform; raises on failure."""

READER: Slot[MediaReader] = Slot("media reader")
"""The reader of the ``Media`` plugin (``agent.provided(READER)``): the agent reads attachments with it, else with
a reader of the defaults (``Host.media``)."""

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
"""The picture formats both OpenAI and Anthropic accept."""


def sniff_image(data: bytes) -> str | None:
    """The content type of an image from its first bytes (JPEG, PNG, GIF, WebP), else None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def attachment_outcome(attachment: Attachment, media: dict[str, Loaded]) -> str:
    """What became of a prepared attachment, for metrics: ``shown`` (an image the model sees), ``read`` (a text
    file), ``transcribed``, or ``not_read``."""
    loaded = media.get(attachment.id)
    if loaded is not None:
        return "shown" if loaded.data is not None else "read"
    return "transcribed" if attachment.text else "not_read"


class Transcriber(Protocol):
    """Speech to text (``core.media.stt.OpenAITranscriber``)."""

    async def transcribe(self, *, data: bytes, name: str, mime: str) -> str:
        """The words spoken in ``data``; raises ``RunError`` on failure."""
        ...


@dataclass(kw_only=True)
class MediaLimits:
    """What the bot reads, and how much (``MEDIA_*`` settings)."""

    image_bytes: int = 5_000_000
    """Larger images are not fetched (Anthropic refuses images over 5 MB)."""
    audio_bytes: int = 20_000_000
    """Larger voice messages and audio files are not transcribed."""
    file_bytes: int = 500_000
    """Larger text files are not read."""
    text_chars: int = 20_000
    """A text file shows at most this many characters to the model (the rest is cut)."""
    fetch_retries: int = 2
    """Retries of a failed download (so ``fetch_retries + 1`` tries)."""
    fetch_timeout: float = 30.0
    """Seconds one download may take."""
    retry_delay: float = 0.5
    """Seconds before the first retry; doubled each time."""
    image_types: tuple[str, ...] = IMAGE_TYPES
    """Image content types shown to the model; other images are named only."""
    kinds: frozenset[AttachmentKind] = frozenset(AttachmentKind)
    """The kinds of attachment that are read at all; the others are only named (``MEDIA_READ``)."""


_A = {AttachmentKind.IMAGE: "an image", AttachmentKind.AUDIO: "a voice message", AttachmentKind.FILE: "a file"}
_PLURAL = {AttachmentKind.IMAGE: "images", AttachmentKind.AUDIO: "voice messages", AttachmentKind.FILE: "files"}
_THE = {AttachmentKind.IMAGE: "the image", AttachmentKind.AUDIO: "the voice message", AttachmentKind.FILE: "the file"}


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """What ``MediaReader.prepare`` did for one input."""

    heard: str = ""
    """The transcripts of its voice messages, joined, for the input's text (empty when nothing was heard)."""
    fetched_bytes: int = 0
    """Bytes downloaded for it."""


@dataclass(kw_only=True)
class _Outcome:
    loaded: Loaded | None = None
    note: str | None = None


@dataclass(kw_only=True, eq=False)
class MediaReader:
    """Turns an input's attachments into what the model can take: image bytes, transcripts, file text or
    notes. Extensions register a ``Fetcher`` per source (``fetchers["telegram"]``) when they start."""

    limits: MediaLimits = field(default_factory=MediaLimits)
    """The limits."""
    transcriber: Transcriber | None = None
    """Speech to text; None: voice messages are not heard."""
    fetchers: dict[str, Fetcher] = field(default_factory=dict)
    """How each source's bytes are fetched."""
    echo: bool = False
    """Quote what was heard back to the user before the answer (``STT_ECHO``; the chat adapters do it)."""
    fetched_bytes: int = 0
    """Bytes downloaded so far (for benchmarks and metrics)."""

    async def prepare(self, ref_attachments: list[Attachment], media: dict[str, Loaded], *, vision: bool) -> Prepared:
        """Read ``ref_attachments`` into ``media`` (by attachment id) and set their notes and transcripts.
        Returns the transcripts and the bytes downloaded."""
        heard: list[str] = []
        tally = [0]
        for attachment in ref_attachments:
            if attachment.id in media or attachment.note is not None or attachment.text is not None:
                continue  # read already (an input prepared twice) or refused for good
            try:
                outcome = await self._read(attachment, vision=vision, tally=tally)
            except Exception as exc:  # a bug here must not cost the message
                log.exception("reading attachment %s failed", attachment.id)
                outcome = _Outcome(note=f"the {attachment.kind.value} could not be read ({type(exc).__name__})")
            if outcome.note is not None:
                attachment.note = outcome.note
            if outcome.loaded is not None:
                media[attachment.id] = outcome.loaded
            if attachment.text:
                heard.append(attachment.text)
        return Prepared(heard="\n".join(heard), fetched_bytes=tally[0])

    async def _read(self, attachment: Attachment, *, vision: bool, tally: list[int]) -> _Outcome:
        kind, size, limits = attachment.kind, attachment.size, self.limits
        what = _A[kind]
        sized = f"{what} of {human_size(size)}" if size else what
        if kind not in limits.kinds:
            return _Outcome(note=f"{what} came; this bot is set not to read {_PLURAL[kind]}")
        if kind is AttachmentKind.IMAGE:
            if not vision:
                return _Outcome(note=f"{what} came, but this model cannot see images")
            if attachment.mime and attachment.mime.split(";")[0].lower() not in limits.image_types:
                return _Outcome(note=f"{what} of type {attachment.mime} was not read (not a supported image type)")
            if size is not None and size > limits.image_bytes:
                return _Outcome(note=f"{sized} was not read (the limit is {human_size(limits.image_bytes)})")
            data = await self._fetch(attachment, limit=limits.image_bytes, tally=tally)
            if isinstance(data, str):
                return _Outcome(note=data)
            mime = sniff_image(data)
            if mime is None or mime not in limits.image_types:
                return _Outcome(note=f"{what} came that is not a JPEG, PNG, GIF or WebP picture, so it was not shown")
            attachment.mime = mime  # what the bytes are, whatever the sender's name or type said
            return _Outcome(loaded=Loaded(attachment=attachment, data=data))
        if kind is AttachmentKind.AUDIO:
            if self.transcriber is None:
                return _Outcome(note=f"{what} came and could not be heard (speech-to-text is not configured)")
            if size is not None and size > limits.audio_bytes:
                return _Outcome(note=f"{sized} was not heard (the limit is {human_size(limits.audio_bytes)})")
            data = await self._fetch(attachment, limit=limits.audio_bytes, tally=tally)
            if isinstance(data, str):
                return _Outcome(note=data)
            try:
                text = await self.transcriber.transcribe(
                    data=data, name=attachment.name or "voice.ogg", mime=attachment.mime
                )
            except BotError as exc:
                log.warning("transcribing attachment %s failed: %s", attachment.id, exc)
                return _Outcome(note=f"{what} came and could not be heard (speech-to-text failed)")
            attachment.text = text.strip()
            if not attachment.text:
                return _Outcome(note=f"{what} came, but no words were heard in it")
            return _Outcome()
        if not is_text(attachment.name, attachment.mime):
            kind_text = f" of type {attachment.mime}" if attachment.mime else ""
            return _Outcome(note=f"a file{kind_text} came; only text files are read, so its content is unknown")
        if size is not None and size > limits.file_bytes:
            return _Outcome(note=f"{sized} was not read (the limit is {human_size(limits.file_bytes)})")
        data = await self._fetch(attachment, limit=limits.file_bytes, tally=tally)
        if isinstance(data, str):
            return _Outcome(note=data)
        if b"\x00" in data[:4096]:
            return _Outcome(note="a file came that is not text; its content is unknown")
        text = data.decode("utf-8", errors="replace")
        if len(text) > limits.text_chars:
            text = text[: limits.text_chars] + f"\n[... cut: the file has {len(text):,} characters]"
        return _Outcome(loaded=Loaded(attachment=attachment, text=text))

    async def _fetch(self, attachment: Attachment, *, limit: int, tally: list[int]) -> bytes | str:
        """The bytes, or a note saying why there are none (after the retries)."""
        fetcher = self.fetchers.get(attachment.source)
        what = _THE[attachment.kind]
        if fetcher is None:
            return f"{what} could not be downloaded (nothing here can fetch from {attachment.source})"
        limits = self.limits
        delay = limits.retry_delay
        for attempt in range(limits.fetch_retries + 1):
            try:
                async with asyncio.timeout(limits.fetch_timeout):
                    data = await fetcher(attachment)
            except Exception as exc:
                log.warning(
                    "downloading attachment %s from %s failed (try %d of %d): %s",
                    attachment.id,
                    attachment.source,
                    attempt + 1,
                    limits.fetch_retries + 1,
                    exc if isinstance(exc, BotError) else type(exc).__name__,
                )
                if attempt < limits.fetch_retries:
                    await asyncio.sleep(delay)
                    delay *= 2
                continue
            self.fetched_bytes += len(data)
            tally[0] += len(data)
            if len(data) > limit:
                size = human_size(len(data))
                return f"{_A[attachment.kind]} of {size} was not read (the limit is {human_size(limit)})"
            return bytes(data)
        return f"{what} could not be downloaded from {attachment.source} (tried {limits.fetch_retries + 1} times)"
