"""End to end: a slash-command registration that fails at start (refused, rate limited, an answer without ids) is a
warning, and the bot keeps answering messages."""

from __future__ import annotations

import logging

import pytest

from .conftest import StartBot, World, answers


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
