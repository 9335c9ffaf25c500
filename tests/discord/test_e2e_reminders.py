"""Reminders end to end with the bot ``build_agent`` builds (the default assistant's actions, schedules in its
memory store), the real discord.py client and the fake Discord: a reminder asked for in two seconds arrives once in
its channel; ``/reminders`` lists, ``/reminders cancel:<id>`` (the ids offered as you type) cancels, for whoever
set it or a member who manages the channel; ``/timezone``; a recurring one fires at each occurrence; a channel the
bot lost loses its schedules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core import ScriptedModel
from core.errors import ChatGoneError
from core.schedules import ManualClock, schedules_of
from extensions.discord import discord_channel
from extensions.discord._lib import discord
from extensions.discord.platform_errors import platform_error
from tests.fakes.discord_server import Json
from tests.schedules.support import StartBot, call, last_result, recurring_model, started_bots

from .conftest import World, say, settings_for

MEMBER = 1024 | 2048  # View Channel, Send Messages: manages nothing
START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


@pytest.fixture
async def bots(world: World, tmp_path: Path) -> AsyncIterator[StartBot]:
    async with started_bots(tmp_path, "discord", discord=settings_for(world.fake).model_dump()) as start:
        yield start


async def slash(world: World, name: str, user: Json, *options: Json, **more: Any) -> Json:
    """Run ``/name`` in #general; the interaction's response."""
    iid = await world.fake.slash(name, world.general, user=user, options=list(options), **more)
    await world.fake.wait_until(lambda: iid in world.fake.interaction_responses)
    return world.fake.interaction_responses[iid]


def option(name: str, value: str, **more: Any) -> Json:
    return {"type": 3, "name": name, "value": value, **more}


async def test_a_reminder_in_two_seconds_arrives_once_in_its_channel(world: World, bots: Callable[..., Any]) -> None:
    clock = ManualClock(START)
    model = ScriptedModel(
        [
            call("set_reminder", {"text": "remind alice to stretch", "in_seconds": 2}),
            lambda request: say(f"Done: {last_result(request)}"),
            lambda request: say("alice, time to stretch!" if "remind alice to stretch" in request.prompt else "?"),
        ]
    )
    agent = await bots(model, clock)
    await world.fake.say(world.general, "remind me in 2 seconds to stretch", author=world.alice, mention_bot=True)
    [done] = await world.fake.wait_posted(world.general)
    assert done["content"].startswith("Done:") and " is set for " in done["content"]
    assert "repeats" not in done["content"]
    cid = f"discord:channel:{world.general}"
    [reminder] = await schedules_of(agent).by_conversation(cid)
    assert reminder.creator == f"discord:{world.alice['id']}"

    await clock.advance(1.5)
    await asyncio.sleep(0.3)
    assert len(world.fake.posted_in(world.general)) == 1  # not yet
    await clock.advance(0.5)
    posted = await world.fake.wait_posted(world.general, 2)
    assert posted[1]["content"] == "alice, time to stretch!"
    await clock.advance(3600)
    await asyncio.sleep(0.3)
    assert [m["content"] for m in world.fake.posted_in(world.general)][1:] == ["alice, time to stretch!"]
    assert world.fake.posted_in(world.dm) == []


async def test_reminders_lists_and_cancels_and_timezone_sets_the_zone(world: World, bots: Callable[..., Any]) -> None:
    clock = ManualClock(START)
    agent = await bots(ScriptedModel(lambda request: say("ok")), clock)
    schedules = schedules_of(agent)
    where = (discord_channel, {"channel_id": world.general, "guild_id": world.guild})
    alice, bob = f"discord:{world.alice['id']}", f"discord:{world.bob['id']}"
    alices = await schedules.once(*where, at=START + timedelta(hours=1), text="water the plants", creator=alice)
    bobs = await schedules.every(*where, 7200, text="check [the docs](https://x.example) **now**", creator=bob)

    listed = await world.fake.slash("reminders", world.general, user=world.bob, permissions=MEMBER)
    await world.fake.wait_until(lambda: listed in world.fake.interaction_responses)
    listing = world.fake.interaction_responses[listed]["data"]
    assert listing["flags"] & 64  # ephemeral: only Bob sees the list
    assert listing["content"].splitlines() == [
        "Reminders and scheduled messages in this chat (2):",
        f"{alices.id[:6]} · 2026-03-02 09:00 UTC · once · {alice}: water the plants",
        # what people wrote is shown inert: a masked link or Markdown in it does not render
        f"{bobs.id[:6]} · 2026-03-02 10:00 UTC · every 2 hour(s) · {bob}: check \\[the docs](https://x.example) "
        "\\*\\*now\\*\\*",
    ]
    offered = await slash(
        world, "reminders", world.bob, option("cancel", "plants", focused=True), permissions=MEMBER, autocomplete=True
    )
    assert [c["value"] for c in offered["data"]["choices"]] == [alices.id]

    shown = world.fake.response_message(listed)
    assert world.fake.buttons(shown) == {
        f"Cancel {alices.id[:6]}": f"cfg:reminders:cancel:{alices.id}",
        f"Cancel {bobs.id[:6]}": f"cfg:reminders:cancel:{bobs.id}",
    }
    pressed = await world.fake.press(shown, f"Cancel {alices.id[:6]}", user=world.bob, permissions=MEMBER)
    await world.fake.wait_until(lambda: pressed in world.fake.interaction_responses)
    assert world.fake.interaction_responses[pressed]["data"]["content"] == (
        f"Only whoever set {alices.id[:6]} and this chat's admins can cancel it."
    )
    pressed = await world.fake.press(shown, f"Cancel {bobs.id[:6]}", user=world.bob, permissions=MEMBER)
    await world.fake.wait_until(lambda: pressed in world.fake.interaction_responses)
    assert shown["content"].startswith(f"Cancelled {bobs.id[:6]}.\n\nReminders and scheduled messages")
    assert world.fake.buttons(shown) == {f"Cancel {alices.id[:6]}": f"cfg:reminders:cancel:{alices.id}"}
    bobs = await schedules.every(*where, 7200, text="check", creator=bob)  # again, for the typed form below
    refused = await slash(world, "reminders", world.bob, option("cancel", alices.id), permissions=MEMBER)
    assert refused["data"]["content"] == f"Only whoever set {alices.id[:6]} and this chat's admins can cancel it."
    mine = await slash(world, "reminders", world.bob, option("cancel", bobs.id[:6]), permissions=MEMBER)
    assert mine["data"]["content"].startswith(f"Cancelled {bobs.id[:6]}.\n\nReminders and scheduled messages")
    managed = await slash(world, "reminders", world.alice, option("cancel", alices.id))  # Manage Server: anyone's
    assert managed["data"]["content"].endswith("No reminders or scheduled messages in this chat.")
    assert await schedules.pending() == 0

    zone = await slash(world, "timezone", world.alice, option("zone", "America/New_York"))
    assert zone["data"]["content"] == "Done: this chat's time zone is now America/New_York."
    offered = await slash(world, "timezone", world.alice, option("zone", "new_y", focused=True), autocomplete=True)
    assert "America/New_York" in [c["value"] for c in offered["data"]["choices"]]
    refused = await slash(world, "timezone", world.bob, option("zone", "UTC"), permissions=MEMBER)
    assert refused["data"]["content"] == "Sorry, only this chat's admins can change the time zone here."
    shown = await slash(world, "settings", world.bob, permissions=MEMBER)
    assert "Time zone: America/New_York" in shown["data"]["content"]


async def test_a_recurring_reminder_fires_at_each_occurrence(world: World, bots: Callable[..., Any]) -> None:
    clock = ManualClock(START)
    model = recurring_model({"text": "say tick", "every_minutes": 2}, say, lambda n: f"Tick {n}")
    agent = await bots(model, clock, schedules_min_interval=60)
    await world.fake.say(world.general, "say tick every 2 minutes", author=world.alice, mention_bot=True)
    await world.fake.wait_posted(world.general)
    for n in range(1, 4):
        await clock.advance(120)
        await world.fake.wait_posted(world.general, 1 + n)
    assert [m["content"] for m in world.fake.posted_in(world.general)][1:] == ["Tick 1", "Tick 2", "Tick 3"]
    cid = f"discord:channel:{world.general}"
    [every] = await schedules_of(agent).by_conversation(cid)
    assert every.every == 120 and every.recurring


async def observed(seen: list[tuple[str, str]], what: tuple[str, str]) -> None:
    """Wait until an observer saw ``what`` (polled: nothing need reach the fake Discord after it, the failed output
    is not handed back to the model)."""
    async with asyncio.timeout(10):
        while what not in seen:
            await asyncio.sleep(0.02)


async def test_a_channel_the_bot_lost_loses_its_schedules(world: World, bots: Callable[..., Any]) -> None:
    clock = ManualClock(START)
    agent = await bots(ScriptedModel(lambda request: say("ok")), clock)
    schedules = schedules_of(agent)
    seen: list[tuple[str, str]] = []
    agent.add_observer(lambda kind, cid, value: seen.append((kind, cid)) if kind.startswith("schedule_") else None)
    gone = world.fake.text_channel(world.guild, "archived")
    await schedules.every(discord_channel, {"channel_id": gone, "guild_id": world.guild}, 600, text="Weekly")
    await schedules.every(discord_channel, {"channel_id": world.general, "guild_id": world.guild}, 900, text="Kept")
    del world.fake.channels[gone]  # deleted: Discord answers 404 Unknown Channel (10003)
    await clock.advance(600)
    await observed(seen, ("schedule_dropped", f"discord:channel:{gone}"))
    assert [s.text for s in await schedules.upcoming(10)] == ["Kept"]


async def test_a_server_that_removed_the_bot_loses_its_schedules(world: World, bots: Callable[..., Any]) -> None:
    clock = ManualClock(START)
    agent = await bots(ScriptedModel(lambda request: say("ok")), clock)
    schedules = schedules_of(agent)
    other = world.fake.guild("Other Server")
    kept = world.fake.text_channel(other, "lobby")
    await schedules.every(discord_channel, {"channel_id": world.general, "guild_id": world.guild}, 600, text="A")
    await schedules.every(discord_channel, {"channel_id": kept, "guild_id": other}, 600, text="B")
    await schedules.every(discord_channel, {"channel_id": world.dm}, 600, text="C")
    await world.fake.remove_bot(world.guild)

    async def dropped() -> bool:
        return await schedules.by_conversation(f"discord:channel:{world.general}") == []

    async with asyncio.timeout(10):
        while not await dropped():
            await asyncio.sleep(0.02)
    assert sorted(s.text for s in await schedules.upcoming(10)) == ["B", "C"]


async def test_a_channel_answering_missing_access_loses_its_schedules(world: World, bots: Callable[..., Any]) -> None:
    clock = ManualClock(START)
    agent = await bots(ScriptedModel(lambda request: say("ok")), clock)
    schedules = schedules_of(agent)
    seen: list[tuple[str, str]] = []
    agent.add_observer(lambda kind, cid, value: seen.append((kind, cid)) if kind.startswith("schedule_") else None)
    other = world.fake.guild("Other Server")
    locked = world.fake.text_channel(other, "lobby")
    await schedules.every(discord_channel, {"channel_id": locked, "guild_id": other}, 600, text="Locked")
    await schedules.every(discord_channel, {"channel_id": world.general, "guild_id": world.guild}, 900, text="Kept")
    world.fake.removed_from.add(other)  # no GUILD_DELETE seen: the post is answered 403 Missing Access (50001)
    await clock.advance(600)
    await observed(seen, ("schedule_dropped", f"discord:channel:{locked}"))
    assert [s.text for s in await schedules.upcoming(10)] == ["Kept"]


def test_the_answers_that_mean_the_bot_may_no_longer_post_there() -> None:
    class Response:
        status, reason = 403, "Forbidden"

    for code in (10003, 50001, 50007):  # Unknown Channel, Missing Access, Cannot send messages to this user
        error = discord.Forbidden(Response(), {"code": code, "message": "no"})  # type: ignore[arg-type]
        assert isinstance(platform_error(error, "post in channel 5", in_channel=True), ChatGoneError)
        assert not isinstance(platform_error(error, "edit a message"), ChatGoneError)  # not posting in a channel
    missing_permissions = discord.Forbidden(Response(), {"code": 50013, "message": "no"})  # type: ignore[arg-type]
    assert not isinstance(platform_error(missing_permissions, "post", in_channel=True), ChatGoneError)
