"""What an MCP tool answered, as an action result the model reads.

Structured content is the result when the tool gives it (the model reads JSON); otherwise the text
blocks joined. Pictures go with the result as attachments (``ActionContext.show_image``): a model that
sees images gets them, any other a note; sounds and binary resources become short stand-ins naming their
type and size. An ``isError`` result raises
``ActionError`` with the tool's own text, which the model sees like any failed action. What a tool
answers is untrusted text: it reaches the prompt only as an action result, escaped there by the one
function in ``core.prompt`` that handles every action result.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from core.errors import ActionError

__all__ = ("MAX_RESULT_CHARS", "block_text", "tool_result")

MAX_RESULT_CHARS = 20_000
"""A tool's text beyond this many characters is cut (the prompt has a budget)."""


def _size(data: str) -> str:
    try:
        raw = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        raw = len(data) * 3 // 4
    return f"{raw / 1024:.1f} kB" if raw >= 1024 else f"{raw} bytes"


def block_text(block: Any) -> str:
    """One content block as text for the model."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return f"[image {block.mime_type}, {_size(block.data)}: not shown, this model reads text only]"
    if isinstance(block, AudioContent):
        return f"[audio {block.mime_type}, {_size(block.data)}: not played, this model reads text only]"
    if isinstance(block, ResourceLink):
        return f"[resource {block.uri}{' (' + block.mime_type + ')' if block.mime_type else ''}]"
    if isinstance(block, EmbeddedResource):
        inner = block.resource
        if isinstance(inner, TextResourceContents):
            return inner.text
        if isinstance(inner, BlobResourceContents):
            kind = inner.mime_type or "binary"
            return f"[resource {inner.uri} ({kind}, {_size(inner.blob)}): not shown]"
    return f"[{getattr(block, 'type', type(block).__name__)} content: not shown]"


def _cut(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return text[:MAX_RESULT_CHARS] + f"\n[... {len(text) - MAX_RESULT_CHARS} more characters cut]"


def _decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def tool_result(result: CallToolResult, *, action: str, show: Callable[[bytes, str], Any] | None = None) -> Any:
    """The action result of ``result``; raises ``ActionError`` when the tool reported an error. With
    ``show(data, mime)`` (``ActionContext.show_image``), pictures go there instead of into the text."""
    texts = []
    for block in result.content:
        if show is not None and isinstance(block, ImageContent) and not result.is_error:
            data = _decode(block.data)
            if data is not None:
                show(data, block.mime_type)
                continue
        texts.append(block_text(block))
    text = "\n".join(t for t in texts if t)
    if result.is_error:
        raise ActionError(f"{action!r} failed: {_cut(text) or 'the tool reported an error without a message'}")
    if result.structured_content is not None:
        return result.structured_content
    return _cut(text)
