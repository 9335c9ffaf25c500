"""The bot's own notices on Discord, through the real discord.py client and the fake Discord: each in the language
the channel chose with /language (``extensions.chat.i18n``, the same texts as on Telegram), and a message the agent
could not take (a full inbox, a failure) answered with a notice rather than dropped in silence."""

from __future__ import annotations

from typing import Any

import core
from core.entries import InputRef, Log
from core.errors import BackpressureError, MemoryStoreError
from extensions.chat.commands import Caller, ChatCommands
from extensions.chat.i18n import say as notice
from extensions.discord import ChannelArgs, discord_channel
from tests.fakes.discord_server import Json

from .conftest import StartBot, World, answers, runtime_of

MEMBER = 1024 | 2048  # View Channel, Send Messages: no Manage Messages
MANAGER = MEMBER | (1 << 13)  # and Manage Messages


class Refusing(core.InProcessDispatcher):
    """Runs messages here, but refuses those that say "flood" (a full inbox) and fails on "boom" (the store)."""

    async def submit(
        self, context: core.Context, args: Any, input_ref: InputRef, *, dedupe_key: str | None = None
    ) -> list[Log]:
        if "flood" in str(input_ref.data):
            raise BackpressureError("the inbox is full", wait=0.0)
        if "boom" in str(input_ref.data):
            raise MemoryStoreError("the memory store is down")
        return await super().submit(context, args, input_ref, dedupe_key=dedupe_key)


async def slash(world: World, name: str, channel: int, user: Json, **options: Any) -> str:
    """Run ``/name`` and return the bot's answer."""
    iid = await world.fake.slash(name, channel, user=user, **options)
    response = await world.fake.wait_until(lambda: world.fake.interaction_responses.get(iid))
    return str(response["data"]["content"])


async def test_a_channel_that_chose_french_gets_french_notices(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers(), agent_options={"dispatcher": Refusing()})
    chosen = await slash(
        world, "language", world.general, world.alice, options=[{"type": 3, "name": "code", "value": "fr"}]
    )
    assert chosen == notice("language_set", "fr")

    flood = await world.fake.say(world.general, "flood", author=world.alice, mention_bot=True)
    [busy] = await world.fake.wait_posted(world.general)
    assert busy["content"] == notice("busy", "fr") != notice("busy")
    assert busy["message_reference"]["message_id"] == flood["id"]  # the message refused is answered
    boom = await world.fake.say(world.general, "boom", author=world.alice, mention_bot=True)
    failed = (await world.fake.wait_posted(world.general, 2))[-1]
    assert failed["content"] == notice("run_failed", "fr")
    assert failed["message_reference"]["message_id"] == boom["id"]

    assert await slash(world, "reset", world.general, world.alice, permissions=MEMBER) == notice(
        "discord.reset_refused", "fr"
    )
    assert await slash(world, "reset", world.general, world.alice, permissions=MANAGER) == notice("reset_done", "fr")
    assert await slash(world, "forget", world.general, world.alice, permissions=MANAGER) == notice("forget_done", "fr")
    help_text = await slash(world, "help", world.general, world.alice)
    assert help_text == notice("discord.help", "fr")

    thread = await world.fake.thread(world.general, "a thread")  # starts from its channel's language
    await world.fake.say(thread, "flood in the thread", author=world.alice, mention_bot=True)
    [busy] = await world.fake.wait_posted(thread)
    assert busy["content"] == notice("busy", "fr")

    await world.fake.say(world.dm, "flood in English", author=world.alice)  # a channel that chose nothing
    [busy] = await world.fake.wait_posted(world.dm)
    assert (
        busy["content"]
        == notice("busy")
        == "I'm answering too many messages right now. Please send that again in a minute."
    )
    assert await slash(world, "reset", world.dm, world.alice) == notice("reset_done")
    await runtime_of(agent).wait_idle()


async def test_a_channel_the_bot_does_not_serve_is_told_so_in_its_language(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(answers(), allowed_channels=[world.general])
    elsewhere = world.fake.text_channel(world.guild, "elsewhere")
    commands, cid = ChatCommands.of(agent, discord_channel, ChannelArgs(channel_id=elsewhere, guild_id=world.guild))
    await commands.set_language(cid, Caller(user="discord:1", manages_chat=True), "fr")
    assert await slash(world, "reset", elsewhere, world.alice) == notice("nothing_to_forget", "fr")
    assert await slash(world, "settings", elsewhere, world.alice) == notice("not_served", "fr")
    assert await slash(world, "reset", world.general, world.alice) == notice("reset_done")
