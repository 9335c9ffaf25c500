"""What a tool answered, as the model reads it."""

from __future__ import annotations

import base64

import pytest
from mcp.types import CallToolResult, EmbeddedResource, ImageContent, TextContent, TextResourceContents

from core.errors import ActionError
from extensions.mcp.results import MAX_RESULT_CHARS, tool_result


def test_structured_content_wins_over_text() -> None:
    result = CallToolResult(content=[TextContent(text='{"sum": 5}')], structured_content={"sum": 5})
    assert tool_result(result, action="t:add") == {"sum": 5}


def test_text_blocks_are_joined_and_pictures_are_stand_ins() -> None:
    picture = ImageContent(data=base64.b64encode(b"x" * 2048).decode(), mime_type="image/png")
    doc = EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="inside"))
    result = CallToolResult(content=[TextContent(text="first"), picture, doc])
    assert tool_result(result, action="t:x") == (
        "first\n[image image/png, 2.0 kB: not shown, this model reads text only]\ninside"
    )


def test_is_error_raises_with_the_tools_text() -> None:
    with pytest.raises(ActionError, match=r"'t:x' failed: no such file"):
        tool_result(CallToolResult(content=[TextContent(text="no such file")], is_error=True), action="t:x")


def test_long_text_is_cut() -> None:
    text = tool_result(CallToolResult(content=[TextContent(text="a" * (MAX_RESULT_CHARS + 10))]), action="t:x")
    assert text.endswith("[... 10 more characters cut]")
