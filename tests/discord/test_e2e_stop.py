"""/stop in Discord (issue 37), through the real discord.py client and the fake Discord: during a slow streamed
answer the slash command cancels the model call, the answer keeps what was written with its mark, no later action
runs, and the presser alone is told; with nothing being written it says so. In a server's channel only the people
the answer is for and its managers may stop it (issue 49)."""

from __future__ import annotations

import asyncio

import pytest

from core import action
from core.engine import STOP_MARK
from extensions.chat.i18n import say
from extensions.discord.posting import MESSAGE
from tests.fakes.slow_model import EndlessModel

from .conftest import StartBot, World


async def test_stop_cancels_the_answer_being_written_in_the_channel(world: World, start_bot: StartBot) -> None:
    model, ran = EndlessModel(MESSAGE), []
    later = action(name="later", handler=lambda args, ctx, agent: ran.append(1))
    await start_bot(model, stream_interval=0.05, agent_options={"actions": [later]})
    await world.fake.say(world.dm, "tell me a story", author=world.alice)
    await asyncio.wait_for(model.writing.wait(), 10)
    await world.fake.wait_until(lambda: any("Once upon a time" in m["content"] for m in world.fake.posted_in(world.dm)))

    iid = await world.fake.slash("stop", world.dm, user=world.alice)
    await world.fake.wait_until(lambda: iid in world.fake.interaction_responses)
    response = world.fake.interaction_responses[iid]["data"]
    assert response["content"] == say("stop_done") and response["flags"] & 64  # ephemeral: the presser alone
    await world.fake.wait_until(
        lambda: any(m["content"].endswith(STOP_MARK) for m in world.fake.posted_in(world.dm)), timeout=10
    )
    assert model.cancelled and ran == []

    iid = await world.fake.slash("stop", world.dm, user=world.alice)
    await world.fake.wait_until(lambda: iid in world.fake.interaction_responses)
    assert world.fake.interaction_responses[iid]["data"]["content"] == say("stop_nothing")


@pytest.mark.parametrize("stopper", ["author", "admin"])
async def test_the_stop_button_is_for_the_asker_and_the_admins_only(
    world: World, start_bot: StartBot, stopper: str
) -> None:
    """Issue 49, point 6: a member the answer is not for presses Stop (or runs /stop) and is told, to them alone,
    who may; the answer goes on. The asker, or a member with Manage Channels, stops it."""
    model = EndlessModel(MESSAGE)
    await start_bot(model, stream_interval=0.05)
    await world.fake.say(world.general, "tell me a story", author=world.alice, mention_bot=True)
    await asyncio.wait_for(model.writing.wait(), 10)
    [story] = await world.fake.wait_until(
        lambda: [m for m in world.fake.posted_in(world.general) if "Once upon a time" in m["content"]]
    )
    assert list(world.fake.buttons(story)) == [say("stop_button")]

    pressed = await world.fake.press(story, say("stop_button"), user=world.bob)
    typed = await world.fake.slash("stop", world.general, user=world.bob, permissions=0)
    for iid in (pressed, typed):
        await world.fake.wait_until(lambda iid=iid: iid in world.fake.interaction_responses)
        response = world.fake.interaction_responses[iid]["data"]
        assert response["content"] == say("stop_not_yours") and response["flags"] & 64  # to them alone
    assert not model.cancelled and list(world.fake.buttons(story)) == [say("stop_button")]

    if stopper == "author":
        iid = await world.fake.press(story, say("stop_button"), user=world.alice)
    else:
        carol = world.fake.user("carol")
        iid = await world.fake.press(story, say("stop_button"), user=carol, permissions=1 << 4)  # Manage Channels
    await world.fake.wait_until(lambda: iid in world.fake.interaction_responses)
    response = world.fake.interaction_responses[iid]["data"]
    assert response["content"] == say("stop_done") and response["flags"] & 64
    await world.fake.wait_until(lambda: story["content"].endswith(STOP_MARK) and not world.fake.buttons(story))
    assert model.cancelled
