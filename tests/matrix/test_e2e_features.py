"""``bots run`` as a process on the fake homeserver, with a model behind the fake OpenAI-compatible server: an answer
streamed by ``m.replace`` edits and stopped with ``!stop``, a picture read (downloaded from the media repository and
shown to the model) and one made (uploaded, posted as ``m.image``), a deleted message forgotten."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import pytest

from tests.bots_fleet import stop_all
from tests.fakes.matrix_server import FakeHomeserver
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.slow_model import SlowModelServer

from .conftest import ANN, StartRun

MESSAGE = "matrix:message"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def answer(text: str) -> str:
    return f'<response><output type="{MESSAGE}">{text}</output></response>'


def model_env(url: str) -> dict[str, str]:
    return {"LLM_PROVIDER": "openai", "LLM_BASE_URL": url, "LLM_API_KEY": "sk-test", "LLM_MODEL": "fake-model"}


@pytest.fixture
async def slow() -> AsyncIterator[SlowModelServer]:
    async with SlowModelServer(MESSAGE, delay=0.05) as server:
        yield server


async def test_an_answer_is_streamed_by_edits_and_stop_ends_it_where_it_was(
    homeserver: FakeHomeserver, start_run: StartRun, slow: SlowModelServer
) -> None:
    room = homeserver.room("Ann and the bot", {ANN: "Ann"})
    bot = await start_run(**model_env(slow.url))
    homeserver.say(room, ANN, "tell me a long story")
    await homeserver.wait_for(lambda: len(homeserver.edits(room)) >= 2, "the answer edited while written")
    [edit, *_] = homeserver.edits(room)
    assert edit.content["m.new_content"]["body"].startswith("Answer 1:")
    homeserver.say(room, ANN, "!stop")
    await slow.wait_closed(1)
    await homeserver.wait_for(lambda: any(t.startswith("Stopped") for t in homeserver.shown(room)), "the stop notice")
    homeserver.say(room, ANN, "and now?")
    await homeserver.wait_for(lambda: "Answer 2." in homeserver.shown(room), "the next answer")
    story = next(t for t in homeserver.shown(room) if t.startswith("Answer 1:"))
    assert "and more" in story  # (what was written stays)
    await stop_all(bot)


async def test_a_picture_sent_reaches_the_model_and_a_picture_made_is_uploaded_and_posted(
    homeserver: FakeHomeserver, start_run: StartRun
) -> None:
    make = '<response><action_call name="make_picture">{"prompt": "a red fox"}</action_call></response>'
    replies = [Reply(chunks=(answer("A picture of bytes."),)), Reply(chunks=(make,)), Reply(chunks=(answer("Done."),))]
    async with FakeOpenAIServer(replies=replies, default=Reply(chunks=(answer("More."),))) as llm:
        room = homeserver.room("Ann and the bot", {ANN: "Ann"})
        bot = await start_run(
            **model_env(llm.url), IMAGES_BASE_URL=llm.url, IMAGES_API_KEY="sk-test", IMAGES_MODEL="image-test"
        )
        homeserver.picture(room, ANN, PNG, name="fox.png")
        await homeserver.wait_for(lambda: "A picture of bytes." in homeserver.shown(room), "the answer to the picture")
        content = llm.requests[0].body["messages"][1]["content"]
        images = [part["image_url"]["url"] for part in content if part["type"] == "image_url"]
        assert images == ["data:image/png;base64," + base64.b64encode(PNG).decode()]
        assert any(path.startswith("/_matrix/client/v1/media/download/") for _, path in homeserver.requests)
        homeserver.say(room, ANN, "draw me a fox")
        await homeserver.wait_for(lambda: bool(homeserver.uploaded()), "the picture posted")
        await homeserver.wait_for(lambda: "Done." in homeserver.shown(room), "the answer with the picture")
        [(data, mime)] = homeserver.uploaded()
        assert data == llm.picture and mime == "image/png"
        [posted] = [s for s in homeserver.bot_messages(room) if s.content.get("msgtype") == "m.image"]
        assert posted.content["url"].startswith("mxc://") and posted.content["info"]["size"] == len(data)
        await stop_all(bot)


async def test_a_deleted_message_leaves_the_conversation(homeserver: FakeHomeserver, start_run: StartRun) -> None:
    async with FakeOpenAIServer(default=Reply(chunks=(answer("Noted."),))) as llm:
        room = homeserver.room("Ann and the bot", {ANN: "Ann"})
        bot = await start_run(**model_env(llm.url))
        secret = homeserver.say(room, ANN, "my code word is zqsecret")
        await homeserver.wait_for(lambda: homeserver.shown(room) == ["Noted."], "the first answer")
        homeserver.redact(room, ANN, secret)
        await bot.wait_for(f"event {secret} in room {room} was deleted")
        homeserver.say(room, ANN, "what was my code word?")
        await homeserver.wait_for(lambda: homeserver.shown(room) == ["Noted.", "Noted."], "the second answer")
        last = json.dumps(llm.requests[-1].body)
        assert "what was my code word?" in last and "zqsecret" not in last
        await stop_all(bot)
