"""``/knowledge`` through the real discord.py client and the fake Discord: anyone sees which collections a channel
searches (``/knowledge show``, for them alone); a member with Manage Channels limits it (``/knowledge use``) and
lifts the limit (``/knowledge all``), a plain member is refused, an unknown collection is named back escaped; the
model's search then reads only those collections; a DM's user chooses for their own DM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.knowledge import Knowledge, SQLiteKnowledge
from core.knowledge.plugin import chat_choice_key
from tests.fakes.discord_server import Json
from tests.knowledge.support import searcher, two_collections

from .conftest import StartBot, World, answers

MEMBER = 1024 | 2048  # View Channel, Send Messages: not an admin of the server


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteKnowledge]:
    yield await two_collections(tmp_path)  # the Knowledge plugin closes it with the agent


async def knowledge(world: World, sub: str, *, user: Json, channel: int | None = None, **more: Any) -> Json:
    """Run ``/knowledge sub`` (``collections=`` for ``use``) and return the interaction's answer."""
    options = [{"type": 3, "name": "collections", "value": more.pop("collections")}] if "collections" in more else []
    iid = await world.fake.slash(
        "knowledge",
        world.general if channel is None else channel,
        user=user,
        options=[{"type": 1, "name": sub, "options": options}],
        **more,
    )
    await world.fake.wait_until(lambda: iid in world.fake.interaction_responses)
    data: Json = world.fake.interaction_responses[iid]["data"]
    return data


async def asked(world: World, text: str) -> None:
    before = len(world.fake.posted_in(world.general))
    await world.fake.say(world.general, text, author=world.bob, mention_bot=True)
    await world.fake.wait_posted(world.general, before + 1)


async def test_a_channels_admin_limits_what_the_bot_searches_there(
    world: World, start_bot: StartBot, store: SQLiteKnowledge
) -> None:
    found: list[list[str]] = []
    await start_bot(searcher("discord:message", found), agent_options={"plugins": [Knowledge(store)]})
    registered = {c["name"]: c for c in world.fake.commands}["knowledge"]
    assert {o["name"] for o in registered["options"]} == {"show", "use", "all"}
    channel = f"discord:channel:{world.general}"

    shown = await knowledge(world, "show", user=world.bob, permissions=MEMBER)
    assert shown["content"].startswith("This chat searches every collection. Collections: hr, shop.")
    assert shown["flags"] & 64  # for the one who asked
    refused = await knowledge(world, "use", user=world.bob, permissions=MEMBER, collections="hr")
    assert refused["content"] == "Sorry, only this chat's admins can choose what the bot searches here."
    assert await store.scope(chat_choice_key(channel)) is None

    unknown = await knowledge(world, "use", user=world.alice, collections="hr **nope**")
    assert unknown["content"] == "There is no collection \\*\\*nope\\*\\* here. Collections: hr, shop."
    assert await store.scope(chat_choice_key(channel)) is None  # nothing stored when a name is wrong
    done = await knowledge(world, "use", user=world.alice, collections="hr")
    assert done["content"] == "Done: this chat searches hr only."
    assert not done.get("flags", 0) & 64  # a change is said to the channel
    assert await store.scope(chat_choice_key(channel)) == ("hr",)

    await asked(world, "what about refunds and gift cards?")
    assert found[-1] and all(cite.startswith("Acme Handbook") for cite in found[-1])  # the FAQ (shop) is not read

    lifted = await knowledge(world, "all", user=world.alice)
    assert lifted["content"] == "Done: this chat searches every collection again."
    assert await store.scope(chat_choice_key(channel)) is None
    await asked(world, "and now?")
    assert any(cite.startswith("Acme FAQ") for cite in found[-1])

    mine = await knowledge(world, "use", user=world.bob, channel=world.dm, collections="shop")  # a DM: theirs
    assert mine["content"] == "Done: this chat searches shop only."
    assert (
        await store.scope(chat_choice_key(f"discord:channel:{world.dm}")) == ("shop",)
        and await store.scope(chat_choice_key(channel)) is None
    )


async def test_a_bot_without_a_knowledge_base_says_so(world: World, start_bot: StartBot) -> None:
    await start_bot(answers())
    answer = await knowledge(world, "use", user=world.alice, collections="hr")
    assert answer["content"] == "This bot has no knowledge base (its operator did not turn one on)."
