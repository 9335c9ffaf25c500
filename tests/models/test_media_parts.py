"""Images reach the OpenAI-compatible and Anthropic APIs as image parts where they stand in the prompt
(base64 data, as each API wants), and speech is transcribed through ``/audio/transcriptions``; all against
the fake servers, which record what they received."""

from __future__ import annotations

import base64

import pytest

from core.errors import ModelAuthError, ModelError
from core.media import OpenAITranscriber
from core.models import AnthropicModel, ImagePart, ModelRequest, OpenAICompatModel, RetryPolicy
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.openai_server import FakeOpenAIServer, Reply

from .support import collect

KEY = "sk-test-media-0123456789SECRET"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
MARKER = '<attachment id="a1" kind="image" name="cat.png" status="shown below"/>'
REQUEST = ModelRequest(
    system="sys",
    prompt=f"<updates><input>what is this?\n{MARKER}\n</input></updates>",
    images=(ImagePart(marker=MARKER, mime="image/png", data=PNG),),
)


async def test_openai_gets_text_and_image_parts_in_order() -> None:
    async with FakeOpenAIServer(api_key=KEY) as server:
        model = OpenAICompatModel(model="m", api_key=KEY, base_url=server.url, retry=RetryPolicy(retries=0))
        try:
            await collect(model, REQUEST)
        finally:
            await model.aclose()
    content = server.requests[0].body["messages"][1]["content"]
    assert [part["type"] for part in content] == ["text", "image_url", "text"]
    assert content[0]["text"].endswith(MARKER)
    assert content[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert content[2]["text"] == "\n</input></updates>"


async def test_openai_without_images_sends_a_plain_string() -> None:
    async with FakeOpenAIServer() as server:
        model = OpenAICompatModel(model="m", base_url=server.url, retry=RetryPolicy(retries=0))
        try:
            await collect(model, ModelRequest(system="", prompt="hi"))
        finally:
            await model.aclose()
    assert server.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]


async def test_anthropic_gets_base64_image_blocks_in_order() -> None:
    async with FakeAnthropicServer(api_key=KEY) as server:
        model = AnthropicModel(api_key=KEY, model="m", base_url=server.url, retry=RetryPolicy(retries=0))
        try:
            await collect(model, REQUEST)
        finally:
            await model.aclose()
    content = server.requests[0].body["messages"][0]["content"]
    assert [block["type"] for block in content] == ["text", "image", "text"]
    assert content[1]["source"] == {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}


async def test_speech_is_transcribed_through_audio_transcriptions() -> None:
    async with FakeOpenAIServer(api_key=KEY) as server:
        server.transcript = "hello from a voice note"
        stt = OpenAITranscriber(base_url=server.url, model="whisper-test", api_key=KEY)
        try:
            text = await stt.transcribe(data=b"OggS" + b"\x00" * 100, name="voice.ogg", mime="audio/ogg")
        finally:
            await stt.aclose()
    assert text == "hello from a voice note"
    [recorded] = server.requests
    assert recorded.path == "/v1/audio/transcriptions"
    assert recorded.body == {
        "model": "whisper-test",
        "file_name": "voice.ogg",
        "file_size": 104,
        "content_type": "audio/ogg",
    }


async def test_transcription_failures_are_our_errors_without_the_key() -> None:
    async with FakeOpenAIServer(api_key=KEY) as server:
        wrong = OpenAITranscriber(base_url=server.url, api_key="sk-wrong-key-SECRET")
        try:
            with pytest.raises(ModelAuthError, match="STT_API_KEY") as refused:
                await wrong.transcribe(data=b"x", name="v.ogg", mime="audio/ogg")
        finally:
            await wrong.aclose()
        assert "SECRET" not in str(refused.value)
        server.transcription_status = 500
        broken = OpenAITranscriber(base_url=server.url, api_key=KEY)
        try:
            with pytest.raises(ModelError, match="STT_MODEL"):
                await broken.transcribe(data=b"x", name="v.ogg", mime="audio/ogg")
        finally:
            await broken.aclose()


async def test_a_text_only_server_that_refuses_images_is_asked_again_with_a_note() -> None:
    refused = Reply(status=400, message="Invalid content type. image_url is only supported by certain models.")
    async with FakeOpenAIServer(replies=[refused]) as server:
        model = OpenAICompatModel(model="m", base_url=server.url, retry=RetryPolicy(retries=0))
        try:
            assert await collect(model, REQUEST) == "Hello there"
            assert model.images_refused
            await collect(model, REQUEST)  # from then on, no image is sent at all
        finally:
            await model.aclose()
    first, second, third = (r.body["messages"][1]["content"] for r in server.requests)
    assert isinstance(first, list) and any(p["type"] == "image_url" for p in first)
    assert second == third and isinstance(second, str)
    assert f"{MARKER}\n(the image could not be shown: this model does not accept images)" in second


async def test_other_refusals_are_not_mistaken_for_images() -> None:
    async with FakeOpenAIServer(replies=[Reply(status=400, message="maximum context length exceeded")]) as server:
        model = OpenAICompatModel(model="m", base_url=server.url, retry=RetryPolicy(retries=0))
        try:
            with pytest.raises(ModelError, match="maximum context length"):
                await collect(model, REQUEST)
        finally:
            await model.aclose()
    assert not model.images_refused and len(server.requests) == 1
