"""What a message carries besides its text: an ``Attachment`` is a reference (platform, file id or URL, type,
size, name), never the bytes; ``Loaded`` is what a run fetched from it. ``format_attachment`` is how the model
sees one, inside its ``<input>``.
"""

from __future__ import annotations

import enum
import mimetypes
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

import pydantic

from ..escape import escape_attr, escape_text
from ..slots import RunValues, Slot
from ..unicode_text import repair_strings

__all__ = (
    "LOADED",
    "Attachment",
    "AttachmentKind",
    "Loaded",
    "describe",
    "format_attachment",
    "format_attachments",
    "human_size",
    "image_marker",
    "is_text",
    "kind_of",
    "loaded_of",
)


class AttachmentKind(enum.StrEnum):
    """What an attachment is, as far as the bot is concerned."""

    IMAGE = "image"
    """A picture the model may see (a photo, a screenshot)."""
    AUDIO = "audio"
    """A voice message or an audio file, transcribed when speech-to-text is configured."""
    FILE = "file"
    """Anything else: text files are read, other files are named only."""


class Attachment(pydantic.BaseModel):
    """One attachment of an input: where its bytes are and what they are, not the bytes themselves. It is
    stored with the input (in Redis, in history); the bytes are fetched by whoever runs the context."""

    model_config = pydantic.ConfigDict(extra="ignore")

    id: str = pydantic.Field(default_factory=lambda: secrets.token_hex(4))
    """Short id, unique within its input (names the attachment in the prompt)."""
    kind: AttachmentKind
    """Image, audio or file."""
    name: str = ""
    """The file name (untrusted: written by the sender)."""
    mime: str = ""
    """The content type the platform gave (``image/jpeg``), or guessed from the name."""
    size: int | None = None
    """Size in bytes, when the platform says."""
    source: str
    """Which fetcher gets the bytes: ``telegram``, ``discord``."""
    ref: str
    """What that fetcher needs: a Telegram ``file_id``, a Discord attachment URL."""
    note: str | None = None
    """Why it was not read, in a short sentence for the model ("an image of 12 MB was not read")."""
    text: str | None = None
    """What was heard in it: the transcript of a voice message (untrusted), also added to the input's text."""

    @pydantic.model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: object) -> object:
        """A file name that is not valid Unicode is repaired (``core.unicode_text``), like the input it comes with."""
        return repair_strings(data)


@dataclass(kw_only=True, eq=False)
class Loaded:
    """What a run fetched from one attachment; lives only as long as the run (never saved)."""

    attachment: Attachment
    """The attachment."""
    data: bytes | None = None
    """The bytes of an image the model will see."""
    text: str | None = None
    """The text of a text file that was read."""


LOADED: Slot[dict[str, Loaded]] = Slot("loaded attachments")
"""What a run fetched from its inputs' attachments, by attachment id (``ContextState.values``): image bytes, file
text. Later runs see the attachments' descriptions."""


def loaded_of(values: RunValues) -> dict[str, Loaded]:
    """What the run whose values are ``values`` fetched, by attachment id (kept under ``LOADED``)."""
    return values.setdefault(LOADED, dict)


_TEXT_EXTENSIONS = frozenset(
    [
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".csv",
        ".tsv",
        ".json",
        ".jsonl",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".log",
        ".xml",
        ".html",
        ".htm",
        ".css",
        ".py",
        ".js",
        ".mjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".java",
        ".kt",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".sh",
        ".bash",
        ".zsh",
        ".ps1",
        ".sql",
        ".swift",
        ".scala",
        ".lua",
        ".r",
        ".pl",
        ".hs",
        ".ex",
        ".exs",
        ".erl",
        ".clj",
        ".dart",
        ".vue",
        ".svelte",
        ".tex",
        ".diff",
        ".patch",
        ".env",
        ".gitignore",
    ]
)
_TEXT_TYPES = frozenset(
    [
        "application/json",
        "application/xml",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/sql",
        "application/javascript",
        "application/x-sh",
        "application/x-python",
        "application/csv",
    ]
)


def is_text(name: str, mime: str) -> bool:
    """True for the files read as text: ``text/*``, JSON, XML, YAML and source code."""
    mime = mime.split(";")[0].strip().lower()
    return mime.startswith("text/") or mime in _TEXT_TYPES or PurePosixPath(name.lower()).suffix in _TEXT_EXTENSIONS


def kind_of(*, name: str, mime: str) -> AttachmentKind:
    """The kind of a file from its content type (or, without one, its name)."""
    mime = (mime or mimetypes.guess_type(name)[0] or "").lower()
    if mime.startswith("image/"):
        return AttachmentKind.IMAGE
    if mime.startswith("audio/"):
        return AttachmentKind.AUDIO
    return AttachmentKind.FILE


def human_size(size: int | None) -> str:
    """``830 bytes``, ``83 KB``, ``12 MB`` (1 MB = 1,000,000 bytes, as people count)."""
    if size is None:
        return "unknown size"
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.0f} KB"
    mb = size / 1_000_000
    return f"{mb:.1f} MB".replace(".0 MB", " MB") if mb < 10 else f"{mb:.0f} MB"


def describe(attachment: Attachment) -> str:
    """A short description: ``image "photo.jpg" (image/jpeg, 83 KB)``."""
    name = f' "{attachment.name}"' if attachment.name else ""
    what = ", ".join(p for p in (attachment.mime, human_size(attachment.size) if attachment.size else "") if p)
    return f"{attachment.kind.value}{name}" + (f" ({what})" if what else "")


def _open_tag(attachment: Attachment) -> str:
    attrs = {"id": attachment.id, "kind": attachment.kind.value}
    if attachment.name:
        attrs["name"] = attachment.name
    if attachment.mime:
        attrs["type"] = attachment.mime
    if attachment.size is not None:
        attrs["size"] = human_size(attachment.size)
    return "<attachment" + "".join(f' {k}="{escape_attr(v)}"' for k, v in attrs.items())


def image_marker(attachment: Attachment) -> str:
    """The element of an image the model is shown: the image goes right after it."""
    return _open_tag(attachment) + ' status="shown below"/>'


def format_attachment(attachment: Attachment, loaded: Loaded | None = None) -> str:
    """The ``<attachment>`` element inside an input: the image's marker when the model sees it this run,
    the text of a text file read this run, the transcript of a voice message, or the note saying why it
    was not read. Names, file text and transcripts are escaped (untrusted)."""
    if loaded is not None and loaded.data is not None:
        return image_marker(attachment)
    if loaded is not None and loaded.text is not None:
        return f'{_open_tag(attachment)} status="read">{escape_text(loaded.text)}</attachment>'
    if attachment.text is not None:  # the transcript became the input's text
        return f'{_open_tag(attachment)} status="transcribed">the text of this message is what was said</attachment>'
    if attachment.note:
        return f'{_open_tag(attachment)} status="not read">{escape_text(attachment.note)}</attachment>'
    return f'{_open_tag(attachment)} status="seen earlier"/>'


def format_attachments(attachments: list[Attachment], media: Mapping[str, Loaded] | None) -> str:
    """Every attachment of an input, one per line (empty when there is none)."""
    media = media or {}
    return "\n".join(format_attachment(a, media.get(a.id)) for a in attachments)
