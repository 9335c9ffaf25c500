"""Media: what a message carries besides text (seed: an input carries parts).

An ``Attachment`` is a reference stored with its input; ``MediaReader`` fetches and reads it when a run
starts, in the process that runs the context; the prompt shows each attachment where it stands in the
conversation, and a model that sees images gets them as image parts of the request (``ImagePart``).
"""

from .attachment import (
    Attachment,
    AttachmentKind,
    Loaded,
    describe,
    format_attachment,
    format_attachments,
    human_size,
    image_marker,
    is_text,
    kind_of,
)
from .reader import Fetcher, MediaLimits, MediaReader, Prepared, Transcriber, attachment_outcome, sniff_image
from .stt import OpenAITranscriber

__all__ = (
    "Attachment",
    "AttachmentKind",
    "Fetcher",
    "Loaded",
    "MediaLimits",
    "MediaReader",
    "OpenAITranscriber",
    "Prepared",
    "Transcriber",
    "attachment_outcome",
    "describe",
    "format_attachment",
    "format_attachments",
    "human_size",
    "image_marker",
    "is_text",
    "kind_of",
    "sniff_image",
)
