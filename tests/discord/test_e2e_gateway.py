"""End to end, the connection and the commands: 4014, slash commands, threads, RESUME, REST-only workers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import core
from core.errors import ConfigError
from core.memory import SQLiteHistory
from core.testing import updates_of
from extensions.discord import DiscordSettings, discord_channel, discord_extension
from extensions.discord.slash_commands import FORGET_DONE

from .conftest import StartBot, World, answers, runtime_of, say, settings_for


async def test_4014_stops_with_a_clear_error(world: World, start_bot: StartBot) -> None:
    world.fake.refuse_intents = True
    with pytest.raises(ConfigError) as caught:
        await start_bot(answers())
    message = str(caught.value)
    assert "4014" in message
    assert "Message Content Intent" in message
    assert "https://discord.com/developers/applications" in message
    assert "Privileged Gateway Intents" in message
    assert "fake-token" not in message
    assert len(world.fake.identifies) == 1  # it did not keep retrying


async def test_an_empty_token_names_the_variable(world: World) -> None:
    agent = core.create_agent(model=answers(), extensions=[discord_extension(settings_for(world.fake, token=None))])
    with pytest.raises(ConfigError, match="DISCORD_TOKEN is empty"):
        await agent.start()


async def test_a_refused_token_names_the_variable(world: World) -> None:
    agent = core.create_agent(
        model=answers(), extensions=[discord_extension(settings_for(world.fake, token="wrong-token"))]
    )
    with pytest.raises(ConfigError, match="refused DISCORD_TOKEN") as caught:
        await agent.start()
    assert "wrong-token" not in str(caught.value)


async def test_slash_commands_are_registered(world: World, start_bot: StartBot) -> None:
    await start_bot(answers())
    names = {c["name"]: c for c in world.fake.commands}
    assert set(names) == {
        "reset",
        "forget",
        "help",
        "model",
        "persona",
        "language",
        "reply",
        "timezone",
        "settings",
        "stats",
        "reminders",
        "memory",
        "stop",
        "voice",
        "busy",
        "quiet",
        "knowledge",
    }
    assert names["reset"]["default_member_permissions"] is None  # offered to all; the bot checks Manage Messages
    assert names["forget"]["default_member_permissions"] is None  # the same people


async def test_help_answers_privately(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers())
    iid = await world.fake.slash("help", world.general, user=world.alice)
    response = await world.fake.wait_until(lambda: world.fake.interaction_responses.get(iid))
    assert response["type"] == 4
    assert response["data"]["content"] == runtime_of(agent).settings.help_text
    assert response["data"]["flags"] & 64  # ephemeral


async def test_reset_clears_the_channels_memory(world: World, start_bot: StartBot) -> None:
    model = answers()
    agent = await start_bot(model)
    await world.fake.say(world.general, "my secret word is pineapple", author=world.alice, mention_bot=True)
    await world.fake.wait_posted(world.general)
    await world.fake.say(world.dm, "a DM stays", author=world.alice)
    await world.fake.wait_posted(world.dm)
    await runtime_of(agent).wait_idle()
    key = f"working:discord:channel:{world.general}"
    store = agent.memory
    assert isinstance(store, core.InMemoryStore)
    assert key in store.data

    iid = await world.fake.slash("reset", world.general, user=world.alice)
    response = await world.fake.wait_until(lambda: world.fake.interaction_responses.get(iid))
    assert "forgot" in response["data"]["content"]
    assert key not in store.data
    assert f"working:discord:channel:{world.dm}" in store.data  # only this channel is forgotten

    await world.fake.say(world.general, "what was my secret word?", author=world.alice, mention_bot=True)
    await world.fake.wait_posted(world.general, 2)
    assert "pineapple" not in model.requests[-1].prompt


async def test_forget_erases_the_channels_history_too(world: World, start_bot: StartBot, tmp_path: Path) -> None:
    history = SQLiteHistory(tmp_path / "history.sqlite3")
    agent = await start_bot(answers(), agent_options={"history": history})
    await world.fake.say(world.general, "my secret word is pineapple", author=world.alice, mention_bot=True)
    await world.fake.wait_posted(world.general)
    await world.fake.say(world.dm, "a DM stays", author=world.alice)
    await world.fake.wait_posted(world.dm)
    await runtime_of(agent).wait_idle()
    general, dm = f"discord:channel:{world.general}", f"discord:channel:{world.dm}"
    assert len(await history.search(general, words="pineapple")) == 1

    iid = await world.fake.slash("forget", world.general, user=world.alice)
    response = await world.fake.wait_until(lambda: world.fake.interaction_responses.get(iid))
    assert response["data"]["content"] == FORGET_DONE
    assert await history.count(general) == 0
    assert await agent.memory.get(f"working:{general}") is None
    assert await history.count(dm) == 2 and await agent.memory.get(f"working:{dm}")  # only this channel


async def test_a_thread_is_a_separate_conversation(world: World, start_bot: StartBot) -> None:
    model = answers()
    agent = await start_bot(model, allowed_channels=[world.general])
    thread = await world.fake.thread(world.general, "side topic")
    await world.fake.say(world.general, "the main topic is apples", author=world.alice, mention_bot=True)
    await world.fake.wait_posted(world.general)
    asked = await world.fake.say(thread, "and here we talk about pears", author=world.alice, mention_bot=True)
    [reply] = await world.fake.wait_posted(thread)
    assert reply["message_reference"]["message_id"] == asked["id"]
    assert "pears" in model.requests[-1].prompt
    assert "apples" not in model.requests[-1].prompt
    await runtime_of(agent).wait_idle()
    store = agent.memory
    assert isinstance(store, core.InMemoryStore)
    assert {f"working:discord:channel:{world.general}", f"working:discord:channel:{thread}"} <= set(store.data)
    assert world.fake.posted_in(world.general)[0]["content"] == "ok"
    assert len(world.fake.posted_in(world.general)) == 1


async def test_messages_missed_during_a_drop_arrive_after_resume(world: World, start_bot: StartBot) -> None:
    await start_bot(answers("still here"))
    await world.fake.drop_gateway()
    await world.fake.say(world.dm, "did you miss me?", author=world.alice)  # sent while disconnected
    [reply] = await world.fake.wait_posted(world.dm)
    assert reply["content"] == "still here"
    assert world.fake.resumes == 1
    assert len(world.fake.identifies) == 1


class _GatedModel:
    """Answers at once, except a prompt containing "slow" waits until ``release`` is set."""

    name = "gated"
    model = ""
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()

    async def stream(self, request: core.ModelRequest) -> AsyncIterator[str]:
        if "slow" in updates_of(request.prompt):
            self.waiting.set()
            await self.release.wait()
        yield say("done")


async def test_a_long_run_in_one_channel_does_not_hold_up_another(world: World, start_bot: StartBot) -> None:
    model = _GatedModel()
    await start_bot(model)
    await world.fake.say(world.general, "a slow question", author=world.alice, mention_bot=True)
    await model.waiting.wait()
    await world.fake.say(world.dm, "a quick one", author=world.alice)
    await world.fake.wait_posted(world.dm)  # answered while the channel's run is still going
    assert world.fake.posted_in(world.general) == []
    model.release.set()
    await world.fake.wait_posted(world.general)


async def test_rest_only_worker_posts_without_the_gateway(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([say("answered by a worker")])
    agent = await start_bot(model, listen=False)
    assert world.fake.identifies == []
    assert world.fake.commands == []  # the gateway process registers them, not workers
    asked = world.fake._message(channel_id=world.general, author=world.alice, content="queued question")
    ref = core.InputRef(type="discord:message", data="queued question", params={"message_id": asked["id"]})
    await agent.run(discord_channel, discord_channel.schema.validate({"channel_id": world.general}), [ref])
    [reply] = world.fake.posted_in(world.general)
    assert reply["content"] == "answered by a worker"
    assert reply["message_reference"]["message_id"] == asked["id"]


async def test_stop_closes_the_connection(world: World) -> None:
    agent = core.create_agent(model=answers(), extensions=[discord_extension(settings_for(world.fake))])
    await agent.start()
    runtime = runtime_of(agent)
    assert runtime.client is not None
    await world.fake.wait_until(lambda: world.fake.heartbeats)  # discord.py beats at once on HELLO; ACKed
    await agent.stop()
    assert runtime.client is None
    await runtime.wait_closed()  # ended by stop: no error
    await world.fake.wait_until(lambda: not world.fake._sockets)


def test_settings_defaults_point_at_discord() -> None:
    settings = DiscordSettings()
    assert settings.api_url == "https://discord.com/api/v10"
    assert settings.gateway_url == "wss://gateway.discord.gg/"


async def test_4014_after_start_ends_the_gateway_with_the_clear_error(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers())
    await world.fake.drop_gateway(code=4014)  # Discord withdrew the intent while connected
    with pytest.raises(ConfigError, match="Message Content Intent"):
        await runtime_of(agent).wait_closed()
    assert isinstance(runtime_of(agent).failure, ConfigError)
