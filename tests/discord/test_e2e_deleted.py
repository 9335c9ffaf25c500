"""A Discord message its author deletes leaves what the bot keeps (issue 35), through the real discord.py client and
the fake Discord: after the deletion event, the working memory no longer holds it and the model never reads it again,
also when the deletion comes while the bot is still answering that very message."""

from __future__ import annotations

import asyncio
from typing import Any

import core
from core import InputRef
from extensions.discord.definitions import ChannelArgs, discord_channel
from extensions.discord.posting import MESSAGE
from tests.fakes.slow_model import EndlessModel

from .conftest import StartBot, World, answers


async def remembered(agent: core.Agent, world: World) -> str:
    state = await agent.load_state(discord_channel, ChannelArgs(channel_id=world.dm))
    return " ".join(str(e.data) for e in state.working_memory.logs if isinstance(e, InputRef))


async def delete(world: World, message: dict[str, Any]) -> None:
    """Its author deletes ``message`` (Discord sends MESSAGE_DELETE)."""
    await world.fake.dispatch("MESSAGE_DELETE", {"id": message["id"], "channel_id": str(world.dm)})


async def test_a_deleted_message_is_never_shown_to_the_model_again(world: World, start_bot: StartBot) -> None:
    model = answers("Noted.")
    agent = await start_bot(model)
    said = await world.fake.say(world.dm, "my locker code is 4711", author=world.alice)
    await world.fake.wait_posted(world.dm, 1)
    await world.fake.wait_until(
        lambda: agent.state_of(agent.context_id(discord_channel, ChannelArgs(channel_id=world.dm))) is None
    )
    assert "4711" in await remembered(agent, world)
    await delete(world, said)
    for _ in range(500):  # (the event reaches the bot through its gateway connection)
        if "4711" not in await remembered(agent, world):
            break
        await asyncio.sleep(0.02)
    assert "4711" not in await remembered(agent, world)
    await world.fake.say(world.dm, "what do you know?", author=world.alice)
    await world.fake.wait_posted(world.dm, 2)
    assert "4711" not in model.requests[-1].prompt and "what do you know?" in model.requests[-1].prompt


async def test_a_message_deleted_while_it_is_answered_leaves_that_run(world: World, start_bot: StartBot) -> None:
    model = EndlessModel(MESSAGE)
    agent = await start_bot(model, stream_interval=0.05)
    said = await world.fake.say(world.dm, "my locker code is 4711, tell me a story", author=world.alice)
    await asyncio.wait_for(model.writing.wait(), 10)
    await delete(world, said)  # while the story is written
    cid = agent.context_id(discord_channel, ChannelArgs(channel_id=world.dm))
    await agent.request_stop(cid)  # (the story would go on for ten seconds)
    await world.fake.wait_until(lambda: agent.state_of(cid) is None)
    assert "4711" not in await remembered(agent, world)
    await world.fake.say(world.dm, "what do you know?", author=world.alice)
    await world.fake.wait_until(lambda: model.calls >= 2)
    await world.fake.wait_until(lambda: agent.state_of(cid) is None)
    assert "4711" not in model.prompts[-1] and "what do you know?" in model.prompts[-1]
