"""Media: what a message carries besides text (seed: an input carries parts).

An ``Attachment`` is a reference stored with its input; ``MediaReader`` fetches and reads it when a run
starts, in the process that runs the context; the prompt shows each attachment where it stands in the
conversation, and a model that sees images gets them as image parts of the request (``ImagePart``).
What the bot sends back (a picture it made, a spoken reply) is an ``Outgoing`` each platform posts
(``MediaPoster``); the plugins that make them are ``core.media.pictures`` and ``core.media.spoken``.
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
from .generate import OpenAIImages, OpenAISpeech
from .outgoing import (
    MediaPoster,
    MediaPosters,
    Outgoing,
    OutgoingKind,
    media_posters,
    post_media,
    post_once,
)
from .reader import Fetcher, MediaLimits, MediaReader, Prepared, Transcriber, attachment_outcome, sniff_image
from .stt import OpenAITranscriber

__all__ = (
    "Attachment",
    "AttachmentKind",
    "Fetcher",
    "Loaded",
    "MediaLimits",
    "MediaPoster",
    "MediaPosters",
    "MediaReader",
    "OpenAIImages",
    "OpenAISpeech",
    "OpenAITranscriber",
    "Outgoing",
    "OutgoingKind",
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
    "media_posters",
    "post_media",
    "post_once",
    "sniff_image",
)
