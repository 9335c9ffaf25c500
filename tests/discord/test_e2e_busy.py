"""/busy and /quiet in Discord (issue 37), through the real discord.py client and the fake Discord: a member without
Manage Channels may look, not change; a manager chooses ``interrupt`` and a message sent while the bot answers stops
that answer (kept with its stop mark) and is answered next; a quiet window answers a burst once."""

from __future__ import annotations

import asyncio
from typing import Any

from core.engine import STOP_MARK
from extensions.chat.i18n import say
from extensions.discord.posting import MESSAGE
from tests.fakes.gated_model import GatedModel
from tests.fakes.slow_model import EndlessModel

from .conftest import Json, StartBot, World

MEMBER = 1024 | 2048  # View Channel and Send Messages: no Manage Channels


async def run(world: World, name: str, user: Json, value: str | None = None, **options: Any) -> str:
    """Run ``/name`` (with its one option set to ``value``) in the general channel; returns the bot's answer."""
    command = next(c for c in world.fake.commands if c["name"] == name)
    given = [{"type": 3, "name": command["options"][0]["name"], "value": value}] if value is not None else []
    iid = await world.fake.slash(name, world.general, user=user, options=given, **options)
    await world.fake.wait_until(lambda: iid in world.fake.interaction_responses)
    content: str = world.fake.interaction_responses[iid]["data"]["content"]
    return content


async def test_a_manager_chooses_interrupt_and_a_new_message_stops_the_answer(
    world: World, start_bot: StartBot
) -> None:
    model = EndlessModel(MESSAGE)
    await start_bot(model, stream_interval=0.05)
    refused = await run(world, "busy", world.bob, "interrupt", permissions=MEMBER)
    assert refused == say("not_allowed", "en", setting=say("setting.busy"))
    assert (await run(world, "busy", world.bob, permissions=MEMBER)).startswith(
        "A message sent here while I answer: as the bot is set up: steer"
    )
    assert await run(world, "busy", world.alice, "interrupt") == say("busy_set", "en", policy=say("busy.interrupt"))

    await world.fake.say(world.general, "tell me a story", author=world.alice, mention_bot=True)
    await asyncio.wait_for(model.writing.wait(), 10)
    await world.fake.say(world.general, "no, just the end", author=world.bob, mention_bot=True)
    await world.fake.wait_until(
        lambda: any(m["content"] == "Short answer 2." for m in world.fake.posted_in(world.general)), timeout=10
    )
    assert model.cancelled
    [story] = [m for m in world.fake.posted_in(world.general) if m["content"].startswith("Once upon a time")]
    assert story["content"].endswith(STOP_MARK)
    assert "no, just the end" in model.prompts[1] and "Once upon a time" in model.prompts[1]


async def test_a_manager_sets_a_quiet_window_and_a_burst_gets_one_answer(world: World, start_bot: StartBot) -> None:
    model = GatedModel(MESSAGE)
    model.release.set()
    await start_bot(model)
    assert await run(world, "quiet", world.alice, "800") == say("quiet_set", "en", window="800 ms")
    for text in ("hi", "one question", "about Redis"):
        await world.fake.say(world.general, text, author=world.alice, mention_bot=True)
    await world.fake.wait_until(
        lambda: any(m["content"] == "Answer 1." for m in world.fake.posted_in(world.general)), timeout=10
    )
    await asyncio.sleep(0.3)
    assert len(model.prompts) == 1 and all(t in model.prompts[0] for t in ("hi", "one question", "about Redis"))
    assert "Quiet window: 800 ms" in await run(world, "settings", world.bob, permissions=MEMBER)
