"""End to end with attachments: the real python-telegram-bot client against the fake Bot API (getFile and the
file download), the real OpenAI client against the fake OpenAI-compatible server, which records what it got."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest

from core import ScriptedModel
from core.media import OpenAITranscriber
from core.media.reader import READER
from core.models import LocalModel, OpenAICompatModel
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot, answer

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer(default=Reply(chunks=(answer("A cat on a sofa."),))) as server:
        yield server


def openai_model(llm: FakeOpenAIServer) -> OpenAICompatModel:
    return llm.model("vision-model")


async def test_a_photo_in_a_private_chat_reaches_the_model_as_an_image_part(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer
) -> None:
    model = openai_model(llm)
    try:
        await start_bot(model)
        update = server.user_sends("photo", JPEG, caption="what is this?")
        [reply] = await server.wait_replies(1)
    finally:
        await model.aclose()
    assert reply.text == "A cat on a sofa." and reply.reply_to == update["message"]["message_id"]
    assert server.downloads == ["photos/file_2.jpg"]  # the larger size, fetched once
    content = llm.requests[0].body["messages"][1]["content"]
    images = [part for part in content if part["type"] == "image_url"]
    assert [i["image_url"]["url"] for i in images] == ["data:image/jpeg;base64," + base64.b64encode(JPEG).decode()]
    text_before = content[content.index(images[0]) - 1]["text"]
    assert "what is this?" in text_before and 'kind="image" name="photo.jpg"' in text_before


async def test_a_voice_note_is_transcribed_and_answered(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer
) -> None:
    llm.transcript = "what is the capital of France"
    model = ScriptedModel([answer("Paris.")], repeat_last=True)
    agent = await start_bot(model)
    stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=llm.url, model="whisper-test")
    try:
        server.user_sends("voice", b"OggS" + bytes(300))
        [reply] = await server.wait_replies(1)
    finally:
        await stt.aclose()
    assert reply.text == "Paris."
    [recorded] = [r for r in llm.requests if r.path.endswith("/audio/transcriptions")]
    assert recorded.body["file_size"] == 304 and recorded.body["model"] == "whisper-test"
    prompt = model.requests[0].prompt
    assert "what is the capital of France" in prompt and 'status="transcribed"' in prompt


async def test_with_stt_echo_what_was_heard_is_quoted_before_the_answer(
    server: FakeTelegramServer, start_bot: StartBot, llm: FakeOpenAIServer
) -> None:
    llm.transcript = "remind me to call mum"
    agent = await start_bot(["Noted."])
    stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=llm.url)
    agent.provided(READER).echo = True
    try:
        update = server.user_sends("voice", b"OggS" + bytes(30))
        quote, reply = await server.wait_replies(2)
    finally:
        await stt.aclose()
    assert quote.text == '🎤 "remind me to call mum"' and reply.text == "Noted."
    assert quote.reply_to == reply.reply_to == update["message"]["message_id"]


async def test_a_voice_note_without_speech_to_text_is_answered_with_what_the_model_was_told(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([answer("Sorry, I cannot listen to voice messages.")], repeat_last=True)
    await start_bot(model)
    server.user_sends("voice", b"OggS")
    [reply] = await server.wait_replies(1)
    assert reply.text == "Sorry, I cannot listen to voice messages."
    assert "could not be heard (speech-to-text is not configured)" in model.requests[0].prompt
    assert server.calls_of("getFile") == []


async def test_a_50_mb_file_and_an_unknown_type_are_refused_politely(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([answer("I can only read text files up to 500 KB.")], repeat_last=True)
    await start_bot(model)
    server.user_sends("document", b"x" * 10, file_name="dump.csv", mime_type="text/csv", file_size=50_000_000)
    server.user_sends(
        "document",
        b"MZ\x00",
        file_name="setup.exe",
        mime_type="application/x-msdownload",
        user_id=1002,
        first_name="Bo",
    )
    replies = await server.wait_replies(2)
    assert {r.text for r in replies} == {"I can only read text files up to 500 KB."}
    prompts = "\n".join(r.prompt for r in model.requests)
    assert "a file of 50 MB was not read (the limit is 500 KB)" in prompts
    assert 'name="setup.exe"' in prompts and "only text files are read, so its content is unknown" in prompts
    assert server.calls_of("getFile") == [] and server.downloads == []


async def test_a_text_file_is_read_and_a_failing_download_becomes_a_note(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([answer("read")], repeat_last=True)
    agent = await start_bot(model)
    agent.provided(READER).limits.retry_delay = 0.0
    server.user_sends("document", b"name,age\nAnn,31\n", file_name="people.csv", mime_type="text/csv")
    await server.wait_replies(1)
    assert 'name="people.csv"' in model.requests[0].prompt and "Ann,31" in model.requests[0].prompt
    server.fail("getFile", status=500, description="Internal Server Error", times=3)
    server.user_sends("document", b"a,b\n", file_name="more.csv", mime_type="text/csv", caption="and this one?")
    await server.wait_replies(2)
    prompt = model.requests[-1].prompt
    assert "and this one?" in prompt and "the file could not be downloaded from telegram (tried 3 times)" in prompt


async def test_the_embedded_model_gets_stand_in_text(server: FakeTelegramServer, start_bot: StartBot) -> None:
    assert LocalModel.vision is False
    model = ScriptedModel([answer("I cannot see pictures.")], repeat_last=True, vision=False)
    await start_bot(model, agent_options={"compact_prompt": True})  # as bots run configures the local provider
    server.user_sends("photo", JPEG, caption="look")
    await server.wait_replies(1)
    [request] = model.requests
    assert request.images == ()
    assert 'Ann: look\n[image "photo.jpg" (image/jpeg, 2 KB) (an image came, but this model cannot see images)]' in (
        request.prompt
    )
    assert server.downloads == []
