"""Pictures the bot makes and spoken replies, end to end: the real discord.py client uploads the fake
OpenAI-compatible server's picture and speech to the fake Discord as message attachments (multipart)."""

from __future__ import annotations

import base64
import json

import core
from core.media import OpenAIImages, OpenAISpeech, OpenAITranscriber
from core.media.pictures import Pictures
from core.media.reader import READER
from core.media.spoken import SpokenReplies
from tests.fakes.discord_server import VOICE_MESSAGE, layout_text
from tests.fakes.openai_server import FakeOpenAIServer

from .conftest import StartBot, World, say


async def test_the_picture_action_posts_the_endpoints_image_as_a_file(world: World, start_bot: StartBot) -> None:
    call = json.dumps({"prompt": "a lighthouse at dusk", "caption": "Your lighthouse @everyone"})
    model = core.ScriptedModel(
        [f'<response><action_call name="make_picture">{call}</action_call></response>', say("Done.")]
    )
    async with FakeOpenAIServer() as openai:
        maker = OpenAIImages(base_url=openai.url)
        try:
            await start_bot(model, agent_options={"plugins": [Pictures(maker)]})
            asked = await world.fake.say(world.dm, "draw a lighthouse", author=world.alice)
            picture, reply = await world.fake.wait_posted(world.dm, 2)
        finally:
            await maker.aclose()
    [(message_id, filename, content_type, data)] = world.fake.uploads
    assert (
        data == openai.picture and filename == "picture.png" and content_type == "application/octet-stream"
    )  # (discord.py sends no type)
    assert message_id == int(picture["id"])
    assert layout_text(picture) == "Your lighthouse @everyone" and picture["mentions"] == []  # (in a media gallery)
    assert picture["message_reference"]["message_id"] == asked["id"] and reply["content"] == "Done."


async def test_a_voice_message_is_answered_with_an_ogg_voice_reply(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say("It is sunny.")], repeat_last=True)
    async with FakeOpenAIServer() as openai:
        speaker = OpenAISpeech(base_url=openai.url)
        agent = await start_bot(model, agent_options={"plugins": [SpokenReplies(speaker)]})
        stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=openai.url)
        try:
            await world.fake.say(
                world.dm, "", author=world.alice, files=[("voice-message.ogg", "audio/ogg", b"OggS" + bytes(64))]
            )
            reply, voice = await world.fake.wait_posted(world.dm, 2)
        finally:
            await stt.aclose()
            await speaker.aclose()
    assert reply["content"] == "It is sunny."
    [(message_id, filename, _type, data)] = world.fake.uploads
    assert message_id == int(voice["id"]) and filename == "reply.ogg" and data == openai.speech
    [spoken] = [r for r in openai.requests if r.path.endswith("/audio/speech")]
    assert spoken.body["input"] == "It is sunny." and spoken.body["response_format"] == "opus"


def ogg_stream(seconds: float, packets: int = 50) -> bytes:
    """A well-formed OGG/Opus stream (headers and ``packets`` audio packets of growing size) lasting ``seconds``
    by its last granule position; the CRCs are not computed (nothing here checks them)."""

    def whole(granule: int, sequence: int, body: list[bytes], kind: int = 0) -> bytes:
        lacing = b"".join(bytes([255] * (len(p) // 255) + [len(p) % 255]) for p in body)
        header = b"OggS" + bytes([0, kind]) + granule.to_bytes(8, "little", signed=True)
        header += (7).to_bytes(4, "little") + sequence.to_bytes(4, "little") + bytes(4) + bytes([len(lacing)])
        return header + lacing + b"".join(body)

    head = b"OpusHead" + bytes([1, 1]) + (312).to_bytes(2, "little") + (48000).to_bytes(4, "little") + bytes(3)
    tags = b"OpusTags" + (4).to_bytes(4, "little") + b"test" + bytes(4)
    audio = [bytes([1]) * (10 + i % 40) for i in range(packets)]
    return whole(0, 0, [head], kind=2) + whole(0, 1, [tags]) + whole(int(seconds * 48000) + 312, 2, audio, kind=4)


async def test_a_spoken_reply_is_posted_as_a_discord_voice_message(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say("It is sunny.")], repeat_last=True)
    async with FakeOpenAIServer() as openai:
        openai.speech = ogg_stream(2.5)
        speaker = OpenAISpeech(base_url=openai.url)
        agent = await start_bot(model, agent_options={"plugins": [SpokenReplies(speaker)]})
        stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=openai.url)
        try:
            asked = await world.fake.say(
                world.dm, "", author=world.alice, files=[("voice-message.ogg", "audio/ogg", b"OggS" + bytes(64))]
            )
            reply, voice = await world.fake.wait_posted(world.dm, 2)
        finally:
            await stt.aclose()
            await speaker.aclose()
    assert reply["content"] == "It is sunny."
    assert voice["flags"] & VOICE_MESSAGE and voice["content"] == ""
    assert voice["message_reference"]["message_id"] == asked["id"]
    [attachment] = voice["attachments"]
    assert attachment["duration_secs"] == 2.5
    waveform = base64.b64decode(attachment["waveform"])
    assert 1 <= len(waveform) <= 256 and max(waveform) == 255
    [(_id, filename, _type, data)] = world.fake.uploads
    assert filename == "voice-message.ogg" and data == openai.speech


async def test_speech_has_its_own_per_day_limit(world: World, start_bot: StartBot) -> None:
    """Issue 49 point 6: spoken replies are held to their own per-day limit (characters spoken, apart from the
    model's tokens): past it the answer is text only, and the speech endpoint is not asked."""
    model = core.ScriptedModel([say("It is sunny.")], repeat_last=True)
    voice = [("voice-message.ogg", "audio/ogg", b"OggS" + bytes(64))]
    async with FakeOpenAIServer() as openai:
        speaker = OpenAISpeech(base_url=openai.url)
        spoken = SpokenReplies(speaker, chars_per_day_user=20)  # one "It is sunny." (12 characters) a day
        agent = await start_bot(model, agent_options={"plugins": [spoken]})
        stt = agent.provided(READER).transcriber = OpenAITranscriber(base_url=openai.url)
        try:
            await world.fake.say(world.dm, "", author=world.alice, files=voice)
            await world.fake.wait_posted(world.dm, 2)  # the text, then the voice reply
            await world.fake.say(world.dm, "", author=world.alice, files=voice)
            await world.fake.wait_posted(world.dm, 3)  # the text only
            await world.fake.say(world.dm, "and now?", author=world.alice)
            await world.fake.wait_posted(world.dm, 4)  # (the run before it is over: no voice reply came)
        finally:
            await stt.aclose()
            await speaker.aclose()
    assert len([r for r in openai.requests if r.path.endswith("/audio/speech")]) == 1
    assert len(world.fake.uploads) == 1
