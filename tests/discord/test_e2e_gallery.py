"""Media galleries in the components v2 layout (issue 54): a picture the bot makes is posted as a container holding
a media gallery of the attached file and its caption; where Discord refuses the layout, as a file with its caption,
as before. The fake Discord checks a gallery as Discord does (1 to 10 items, each a media URL that is an http(s)
address or ``attachment://`` a file of the same message). Through the real discord.py client and the fake Discord."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

import core
from core.media import OpenAIImages
from core.media.pictures import Pictures
from extensions.discord._lib import discord
from tests.fakes.discord_server import IS_COMPONENTS_V2, layout_galleries, layout_text
from tests.fakes.openai_server import FakeOpenAIServer

from .conftest import StartBot, World, runtime_of, say

CAPTION = "Your lighthouse @everyone"


async def _picture_and_reply(world: World, start_bot: StartBot, **settings: Any) -> tuple[Any, ...]:
    """The bot makes a picture (the fake OpenAI server's) and answers "Done."; returns the picture's message, the
    reply, the message it answered and the picture's bytes."""
    call = json.dumps({"prompt": "a lighthouse at dusk", "caption": CAPTION})
    model = core.ScriptedModel(
        [f'<response><action_call name="make_picture">{call}</action_call></response>', say("Done.")]
    )
    async with FakeOpenAIServer() as openai:
        maker = OpenAIImages(base_url=openai.url)
        try:
            await start_bot(model, agent_options={"plugins": [Pictures(maker)]}, **settings)
            asked = await world.fake.say(world.dm, "draw a lighthouse", author=world.alice)
            picture, reply = await world.fake.wait_posted(world.dm, 2)
        finally:
            await maker.aclose()
    return picture, reply, asked, openai.picture


async def test_a_picture_is_posted_in_a_media_gallery(world: World, start_bot: StartBot) -> None:
    picture, reply, asked, data = await _picture_and_reply(world, start_bot)
    assert int(picture["flags"]) & IS_COMPONENTS_V2 and picture["content"] == ""
    [container] = picture["components"]
    assert container["type"] == 17 and [c["type"] for c in container["components"]] == [12, 10]
    [gallery] = layout_galleries(picture)
    assert gallery["items"] == [
        {"media": {"url": "attachment://picture.png"}, "description": CAPTION, "spoiler": False}
    ]
    assert layout_text(picture) == CAPTION and picture["mentions"] == []  # the caption pings nobody
    [(message_id, filename, _type, uploaded)] = world.fake.uploads
    assert message_id == int(picture["id"]) and filename == "picture.png" and uploaded == data
    assert picture["message_reference"]["message_id"] == asked["id"] and reply["content"] == "Done."


async def test_a_refused_gallery_falls_back_to_the_file(world: World, start_bot: StartBot) -> None:
    world.fake.refuse_layout = True
    picture, reply, _asked, data = await _picture_and_reply(world, start_bot)
    assert not int(picture["flags"]) & IS_COMPONENTS_V2 and picture["content"] == CAPTION
    [(message_id, filename, _type, uploaded)] = world.fake.uploads  # the refused request stored nothing
    assert message_id == int(picture["id"]) and filename == "picture.png" and uploaded == data
    assert reply["content"] == "Done."


async def test_the_layout_off_posts_the_file(world: World, start_bot: StartBot) -> None:
    picture, _reply, _asked, _data = await _picture_and_reply(world, start_bot, components_v2=False)
    assert not int(picture["flags"]) & IS_COMPONENTS_V2 and picture["content"] == CAPTION
    assert picture["attachments"][0]["filename"] == "picture.png"


def _gallery_view(*urls: str) -> discord.ui.LayoutView:
    container: discord.ui.Container[discord.ui.LayoutView] = discord.ui.Container()
    container.add_item(discord.ui.MediaGallery(*(discord.MediaGalleryItem(url) for url in urls)))
    view = discord.ui.LayoutView(timeout=None)
    view.add_item(container)
    return view


@pytest.mark.parametrize(
    ("urls", "files", "code"),
    [
        (("attachment://other.png",), ("picture.png",), "UNFURLED_MEDIA_ITEM_ATTACHMENT_NOT_FOUND"),
        (("javascript:alert(1)",), (), "URL_TYPE_INVALID_PROTOCOL"),
        (tuple(f"https://example.com/{n}.png" for n in range(11)), (), "BASE_TYPE_BAD_LENGTH"),
    ],
)
async def test_the_fake_refuses_a_gallery_discord_refuses(
    world: World, start_bot: StartBot, urls: tuple[str, ...], files: tuple[str, ...], code: str
) -> None:
    """What makes the gallery tests meaningful: a gallery naming a file the message does not carry, an address that
    is not http(s), or more than ten items is refused with 400, as Discord does; a good one is taken."""
    agent = await start_bot(core.ScriptedModel([]))
    client = runtime_of(agent).client
    assert client is not None
    channel = client.get_partial_messageable(world.general)
    attached = [discord.File(io.BytesIO(b"\x89PNG"), filename=name) for name in files]
    with pytest.raises(discord.HTTPException) as caught:
        await channel.send(view=_gallery_view(*urls), files=attached)
    assert caught.value.status == 400 and code in caught.value.text
    assert world.fake.posted_in(world.general) == []
    good = await channel.send(
        view=_gallery_view("attachment://picture.png", "https://example.com/a.png"),
        files=[discord.File(io.BytesIO(b"\x89PNG"), filename="picture.png")],
    )
    [posted] = world.fake.posted_in(world.general)
    assert int(posted["id"]) == good.id and len(layout_galleries(posted)[0]["items"]) == 2
