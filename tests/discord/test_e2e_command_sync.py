"""End to end, the slash commands: a registration that fails at start (refused, rate limited, an answer without ids)
is a warning and the bot keeps answering messages; /reset needs Manage Messages or an admin user."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import core
from extensions.discord.slash_commands import RESET_REFUSED

from .conftest import StartBot, World, answers, runtime_of


@pytest.mark.parametrize("answer", ["refuse", "malformed", "rate_limited"])
async def test_a_failed_command_sync_is_a_warning_and_the_bot_runs(
    world: World, start_bot: StartBot, answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    if answer == "rate_limited":  # discord.py tries 5 times, then gives up
        world.fake.rate_limit("PUT", r"/applications/\d+/commands", retry_after=0.01, times=10)
    else:
        world.fake.command_answer = answer
    with caplog.at_level(logging.WARNING):
        await start_bot(answers("still here"))
    assert any("could not register the slash commands" in r.getMessage() for r in caplog.records)
    await world.fake.say(world.dm, "hello?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm)
    assert reply["content"] == "still here"


async def test_reset_needs_manage_messages_or_an_admin_user(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(
        answers(),
        agent_options={"limiter": core.Limiter(core.LimitConfig(admins=frozenset({f"discord:{world.bob['id']}"})))},
    )
    await world.fake.say(world.general, "remember pineapple", author=world.alice, mention_bot=True)
    await world.fake.wait_posted(world.general)
    await runtime_of(agent).wait_idle()
    key = f"working:discord:channel:{world.general}"
    assert await agent.memory.get(key)

    async def reset(user: Any, permissions: int) -> str:
        iid = await world.fake.slash("reset", world.general, user=user, permissions=permissions)
        response = await world.fake.wait_until(lambda: world.fake.interaction_responses.get(iid))
        return str(response["data"]["content"])

    assert await reset(world.alice, 1 << 10) == RESET_REFUSED  # may only view the channel
    assert await agent.memory.get(key)
    assert "forgot" in await reset(world.bob, 1 << 10)  # an admin user
    assert not await agent.memory.get(key)
    await world.fake.say(world.general, "again", author=world.alice, mention_bot=True)
    await world.fake.wait_posted(world.general, 2)
    await runtime_of(agent).wait_idle()
    assert "forgot" in await reset(world.alice, (1 << 10) | (1 << 13))  # with Manage Messages
    assert not await agent.memory.get(key)
    assert {c.get("default_member_permissions") for c in world.fake.commands} == {None}
