"""Pictures the bot makes and spoken replies, end to end: the real python-telegram-bot client posts a photo
(``sendPhoto``) and a voice message (``sendVoice``) to the fake Bot API, with what the fake OpenAI-compatible
server's ``/images/generations`` and ``/audio/speech`` made."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from core import ScriptedModel
from core.media import OpenAIImages, OpenAISpeech, OpenAITranscriber
from core.media.pictures import Pictures
from core.media.reader import READER
from core.media.spoken import SpokenReplies
from core.usage import InMemoryUsage, day_of
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot, answer


def picture_call(prompt: str) -> str:
    return f'<response><action_call name="make_picture">{json.dumps({"prompt": prompt})}</action_call></response>'


@pytest.fixture
async def openai() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(api_key="sk-images-secret") as server:
        yield server


async def test_the_picture_action_posts_the_endpoints_image_as_a_photo_and_counts_it(
    server: FakeTelegramServer, start_bot: StartBot, openai: FakeOpenAIServer
) -> None:
    maker = OpenAIImages(base_url=openai.url, model="image-test", api_key="sk-images-secret")
    usage = InMemoryUsage()
    model = ScriptedModel([picture_call("a red fox in the snow"), answer("Here is your fox.")])
    try:
        await start_bot(model, agent_options={"plugins": [Pictures(maker, usage=usage, per_day_user=1)]})
        update = server.user_says("draw a fox")
        [reply] = await server.wait_replies(1)
        await server.wait_for(lambda: bool(server.media))
    finally:
        await maker.aclose()
    [photo] = server.media
    assert photo.method == "sendPhoto" and photo.file.data == openai.picture
    assert photo.reply_to == update["message"]["message_id"] and reply.text == "Here is your fox."
    [request] = [r for r in openai.requests if r.path.endswith("/images/generations")]
    assert request.body["prompt"] == "a red fox in the snow" and request.body["response_format"] == "b64_json"
    assert request.body["model"] == "image-test"
    totals = await usage.totals("pictures:user:telegram:1001", [day_of()])
    assert totals.output_tokens == 1
    assert "sk-images-secret" not in repr(maker)


async def test_a_second_picture_over_the_daily_limit_is_refused_with_a_clear_message(
    server: FakeTelegramServer, start_bot: StartBot, openai: FakeOpenAIServer
) -> None:
    maker = OpenAIImages(base_url=openai.url, api_key="sk-images-secret")
    usage = InMemoryUsage()
    await usage.add(day=day_of(), keys=["pictures:user:telegram:1001"], input_tokens=0, output_tokens=1, cost=0)
    model = ScriptedModel([picture_call("another fox"), answer("No more pictures today.")])
    try:
        await start_bot(model, agent_options={"plugins": [Pictures(maker, usage=usage, per_day_user=1)]})
        server.user_says("draw another fox")
        [reply] = await server.wait_replies(1)
    finally:
        await maker.aclose()
    assert reply.text == "No more pictures today." and server.media == []
    assert not [r for r in openai.requests if r.path.endswith("/images/generations")]
    assert "IMAGES_PER_DAY_USER" in model.requests[1].prompt


async def test_without_an_images_endpoint_the_action_refuses_saying_so(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([picture_call("a fox"), answer("I cannot make pictures here.")])
    await start_bot(model, agent_options={"plugins": [Pictures(None)]})
    server.user_says("draw a fox")
    [reply] = await server.wait_replies(1)
    assert reply.text == "I cannot make pictures here." and server.media == []
    assert "IMAGES_BASE_URL" in model.requests[1].prompt


async def test_a_voice_message_is_answered_with_a_voice_reply_from_the_speech_endpoint(
    server: FakeTelegramServer, start_bot: StartBot, openai: FakeOpenAIServer
) -> None:
    openai.transcript = "what is the capital of France"
    speaker = OpenAISpeech(base_url=openai.url, model="tts-test", voice="nova", api_key="sk-images-secret")
    usage = InMemoryUsage()
    model = ScriptedModel([answer("**Paris** is the capital.")], repeat_last=True)
    agent = await start_bot(model, agent_options={"plugins": [SpokenReplies(speaker, usage=usage, max_chars=100)]})
    stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=openai.url, api_key="sk-images-secret")
    try:
        update = server.user_sends("voice", b"OggS" + bytes(300))
        [reply] = await server.wait_replies(1)
        await server.wait_for(lambda: bool(server.media))
        server.user_says("and of Spain?")  # a text message is answered in text only
        await server.wait_replies(2)
    finally:
        await stt.aclose()
        await speaker.aclose()
    assert reply.text == "Paris is the capital."
    [voice] = server.media
    assert voice.method == "sendVoice" and voice.file.data == openai.speech and voice.file.filename == "reply.ogg"
    assert voice.reply_to == update["message"]["message_id"]
    [spoken] = [r for r in openai.requests if r.path.endswith("/audio/speech")]
    assert spoken.body == {
        "input": "Paris is the capital.",
        "model": "tts-test",
        "voice": "nova",
        "response_format": "opus",
    }
    totals = await usage.totals("speech:user:telegram:1001", [day_of()])
    assert totals.output_tokens == len("Paris is the capital.")
