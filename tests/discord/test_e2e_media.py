"""End to end with attachments: the real discord.py client against the fake Discord (its CDN serves the
files), the real OpenAI client against the fake OpenAI-compatible server, which records what it got."""

from __future__ import annotations

import base64

import core
from core.media import OpenAITranscriber
from core.media.reader import READER
from tests.fakes.openai_server import FakeOpenAIServer, Reply

from .conftest import StartBot, World, say

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


async def test_an_image_attachment_in_a_channel_reaches_the_model_as_an_image_part(
    world: World, start_bot: StartBot
) -> None:
    async with FakeOpenAIServer(default=Reply(chunks=(say("A chart going up."),))) as llm:
        model = llm.model("vision-model")
        try:
            await start_bot(model)
            asked = await world.fake.say(
                world.general,
                "what does this show?",
                author=world.alice,
                mention_bot=True,
                files=[("chart.png", "image/png", PNG)],
            )
            [reply] = await world.fake.wait_posted(world.general)
        finally:
            await model.aclose()
    assert reply["content"] == "A chart going up."
    assert reply["message_reference"]["message_id"] == asked["id"]
    assert world.fake.downloads == [f"/attachments/{world.general}/{asked['attachments'][0]['id']}/chart.png"]
    content = llm.requests[0].body["messages"][1]["content"]
    [image] = [part for part in content if part["type"] == "image_url"]
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    before = content[content.index(image) - 1]["text"]
    assert "what does this show?" in before and 'name="chart.png"' in before
    assert "/attachments/" not in before  # the signed URL is not shown to the model


async def test_an_attachment_alone_is_answered_and_limits_are_notes(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say("noted")], repeat_last=True)
    await start_bot(model)
    await world.fake.say(
        world.dm, "", author=world.alice, files=[("backup.zip", "application/zip", b"PK")], claimed_size=50_000_000
    )
    await world.fake.wait_posted(world.dm)
    prompt = model.requests[0].prompt
    assert 'name="backup.zip"' in prompt and "only text files are read, so its content is unknown" in prompt
    assert world.fake.downloads == []


async def test_a_text_file_is_read_after_a_failed_download(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say("read it")], repeat_last=True)
    agent = await start_bot(model)
    agent.provided(READER).limits.retry_delay = 0.0
    world.fake.failing_downloads = 1
    await world.fake.say(world.dm, "check this", author=world.alice, files=[("notes.md", None, b"# Plan\n- ship it")])
    await world.fake.wait_posted(world.dm)
    assert len(world.fake.downloads) == 2
    assert "# Plan\n- ship it" in model.requests[0].prompt


async def test_a_voice_message_is_transcribed_quoted_and_answered(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say("It is sunny.")], repeat_last=True)
    agent = await start_bot(model)
    async with FakeOpenAIServer() as llm:
        llm.transcript = "how is the weather"
        stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=llm.url)
        agent.provided(READER).echo = True
        try:
            asked = await world.fake.say(
                world.dm, "", author=world.alice, files=[("voice-message.ogg", "audio/ogg", b"OggS" + bytes(64))]
            )
            quote, reply = await world.fake.wait_posted(world.dm, 2)
        finally:
            await stt.aclose()
    assert quote["content"] == '🎤 "how is the weather"' and reply["content"] == "It is sunny."
    assert reply["message_reference"]["message_id"] == asked["id"]
    assert "how is the weather" in model.requests[0].prompt
    assert [r.body["file_name"] for r in llm.requests] == ["voice-message.ogg"]
