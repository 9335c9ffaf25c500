"""Forum posts as conversations (issue 54, point 4): each post of a forum channel is a thread, and each thread its own
conversation (its own memory; its chat settings start from the forum's), through the real discord.py client and the
fake Discord."""

from __future__ import annotations

from core import ScriptedModel
from extensions.discord.definitions import ChannelArgs, discord_channel

from .conftest import StartBot, World, say


async def test_each_forum_post_is_its_own_conversation(world: World, start_bot: StartBot) -> None:
    forum = world.fake.forum_channel(world.guild, "help")
    model = ScriptedModel([say("Try turning it off and on."), say("Use a bigger pot.")], repeat_last=True)
    agent = await start_bot(model)
    first = await world.fake.forum_post(
        forum, "Router broken", "my router blinks red", author=world.alice, mention_bot=True
    )
    [answer] = await world.fake.wait_posted(int(first["channel_id"]), 1)
    assert answer["message_reference"]["message_id"] == first["id"]
    second = await world.fake.forum_post(forum, "Soup", "my soup boils over", author=world.bob, mention_bot=True)
    await world.fake.wait_posted(int(second["channel_id"]), 1)
    assert first["channel_id"] != second["channel_id"]
    # the second post's conversation never saw the first's
    assert "router" not in model.requests[1].prompt and "soup" in model.requests[1].prompt
    posts = [
        ChannelArgs(channel_id=int(m["channel_id"]), guild_id=world.guild, parent_id=forum) for m in (first, second)
    ]
    ids = {agent.context_id(discord_channel, args) for args in posts}
    assert len(ids) == 2
    assert world.fake.posted_in(forum) == []  # nothing is posted in the forum itself
