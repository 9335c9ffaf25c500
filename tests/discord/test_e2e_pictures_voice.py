"""Pictures the bot makes and spoken replies, end to end: the real discord.py client uploads the fake
OpenAI-compatible server's picture and speech to the fake Discord as message attachments (multipart)."""

from __future__ import annotations

import json

import core
from core.media import OpenAIImages, OpenAISpeech, OpenAITranscriber
from core.media.pictures import Pictures
from core.media.spoken import SpokenReplies
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
    assert picture["content"] == "Your lighthouse @everyone" and picture["mentions"] == []
    assert picture["message_reference"]["message_id"] == asked["id"] and reply["content"] == "Done."


async def test_a_voice_message_is_answered_with_an_ogg_voice_reply(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say("It is sunny.")], repeat_last=True)
    async with FakeOpenAIServer() as openai:
        speaker = OpenAISpeech(base_url=openai.url)
        agent = await start_bot(model, agent_options={"plugins": [SpokenReplies(speaker)]})
        stt = agent.media.transcriber = OpenAITranscriber(base_url=openai.url)
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
