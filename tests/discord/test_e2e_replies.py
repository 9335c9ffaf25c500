"""End to end, what the answers look like: split, fenced, never pinging, surviving 429s and failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import core
from core.errors import ModelError
from core.testing import updates_of
from extensions.discord._lib import discord
from extensions.discord.posting import nonce_for

from .conftest import StartBot, World, barrier, runtime_of, say


class _Gate:
    """Answers "ok"; a prompt with "first" in its updates waits for ``release``."""

    name = "gate"
    model = ""
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: core.ModelRequest) -> AsyncIterator[str]:
        if "first" in updates_of(request.prompt):
            self.entered.set()
            await self.release.wait()
        yield say("ok")


def _fence_lines(chunk: str) -> list[str]:
    return [line.strip() for line in chunk.split("\n") if line.strip().startswith("```")]


async def test_a_long_answer_with_code_arrives_as_valid_chunks(world: World, start_bot: StartBot) -> None:
    code = "\n".join(f"    total = total + {n}  # step {n} of the long computation" for n in range(120))
    answer = f"Here is the program:\n\n```python\ndef compute():\n    total = 0\n{code}\n    return total\n```\n\nThat is all."
    assert len(answer) > 6000
    await start_bot(core.ScriptedModel([say(answer)]))
    asked = await world.fake.say(world.dm, "write me a long program", author=world.alice)
    chunks = await world.fake.wait_posted(world.dm, 4)
    await world.fake.wait_until(lambda: "That is all." in world.fake.posted_in(world.dm)[-1]["content"])
    chunks = world.fake.posted_in(world.dm)
    assert all(len(c["content"]) <= 2000 for c in chunks)
    assert chunks[0]["message_reference"]["message_id"] == asked["id"]
    assert all("message_reference" not in c for c in chunks[1:])
    for chunk in chunks:
        fences = _fence_lines(chunk["content"])
        assert len(fences) % 2 == 0, f"unbalanced fences in {chunk['content'][:80]!r}"
    for chunk in chunks[1:-1]:
        assert chunk["content"].startswith("```python\n")  # the code block is re-opened with its language
    body = "".join(c["content"] for c in chunks)
    positions = [body.index(f"# step {n} of") for n in range(120)]
    assert positions == sorted(positions)  # every line arrives, in order


async def test_everyone_in_the_model_output_pings_nobody(world: World, start_bot: StartBot) -> None:
    answer = f"Hey @everyone and @here, look at this, <@{world.bob['id']}>!"
    await start_bot(core.ScriptedModel([say(answer)]))
    await world.fake.say(world.general, "announce it", author=world.alice, mention_bot=True)
    [reply] = await world.fake.wait_posted(world.general)
    assert reply["content"] == answer
    assert reply["mention_everyone"] is False
    assert reply["mentions"] == []  # not bob, and not alice through the reply either
    [request] = [r for r in world.fake.requests if r.method == "POST" and r.path.endswith("/messages")]
    assert request.body["allowed_mentions"]["parse"] == []
    assert request.body["allowed_mentions"].get("replied_user", False) is False


async def test_a_429_is_waited_out_and_the_reply_arrives(world: World, start_bot: StartBot) -> None:
    await start_bot(core.ScriptedModel([say("worth the wait")]))
    world.fake.rate_limit("POST", rf"/channels/{world.dm}/messages", retry_after=0.05)
    await world.fake.say(world.dm, "hello?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm)
    assert reply["content"] == "worth the wait"
    posts = [r.status for r in world.fake.requests if r.method == "POST" and r.path.endswith("/messages")]
    assert posts == [429, 200]
    assert world.fake.rate_limits[0].served == 1


async def test_a_failed_run_tells_the_user(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel([ModelError("connection refused by the model server")])
    agent = await start_bot(model)
    asked = await world.fake.say(world.dm, "are you there?", author=world.alice)
    [reply] = await world.fake.wait_posted(world.dm)
    assert reply["content"] == runtime_of(agent).settings.error_message
    assert "connection refused" not in reply["content"]
    assert reply["message_reference"]["message_id"] == asked["id"]


async def test_the_model_can_react(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel(
        [
            '<response><action_call name="discord:react">{"emoji": "👍"}</action_call>'
            '<output type="discord:message">noted</output></response>',
            "<response></response>",
        ]
    )
    await start_bot(model)
    asked = await world.fake.say(world.dm, "remember to buy milk", author=world.alice)
    await world.fake.wait_posted(world.dm)
    await world.fake.wait_until(lambda: world.fake.reactions)
    assert world.fake.reactions == [(world.dm, int(asked["id"]), "👍")]


async def test_a_refused_reaction_is_reported_to_the_model(world: World, start_bot: StartBot) -> None:
    model = core.ScriptedModel(
        [
            '<response><action_call name="discord:react">{"emoji": "thumbsup"}</action_call></response>',
            say("sorry, no reaction"),
        ]
    )
    await start_bot(model)
    await world.fake.say(world.dm, "react please", author=world.alice)
    await world.fake.wait_posted(world.dm)
    assert world.fake.reactions == []
    assert "Unknown Emoji" in model.requests[1].prompt


async def test_post_reply_is_idempotent_and_splits(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(core.ScriptedModel([]))
    runtime = runtime_of(agent)
    text = "word " * 900  # 4,500 characters
    first = await runtime.post_reply(channel_id=world.general, text=text, reply_to=None, idempotency_key="batch-1")
    again = await runtime.post_reply(channel_id=world.general, text=text, reply_to=None, idempotency_key="batch-1")
    assert len(first) == 3
    assert again == first
    assert len(world.fake.posted_in(world.general)) == 3
    nonces = [r.body["nonce"] for r in world.fake.requests if r.method == "POST" and r.path.endswith("/messages")]
    assert nonces[:3] == [nonce_for("batch-1", i) for i in range(3)]
    assert all(len(n) <= 25 for n in nonces)
    assert all(r.body["enforce_nonce"] is True for r in world.fake.requests if r.path.endswith("/messages"))


async def test_a_burst_in_one_channel_shares_one_typing_indicator(world: World, start_bot: StartBot) -> None:
    model = _Gate()
    agent = await start_bot(model, reply_policy="always")
    await world.fake.say(world.general, "first", author=world.alice)
    await model.entered.wait()
    for n in range(5):
        await world.fake.say(world.general, f"more {n}", author=world.alice)
    await barrier(world)
    model.release.set()
    await runtime_of(agent).wait_idle()
    assert world.fake.typing.count(world.general) == 1  # not one per message
    assert len(world.fake.posted_in(world.general)) >= 1


async def test_the_fake_refuses_more_than_2000_characters(world: World, start_bot: StartBot) -> None:
    """What makes the chunking test meaningful: an unsplit long message is refused, as Discord does."""
    agent = await start_bot(core.ScriptedModel([]))
    client = runtime_of(agent).client
    assert client is not None
    with pytest.raises(discord.HTTPException) as caught:
        await client.get_partial_messageable(world.general).send("x" * 2001)
    assert caught.value.status == 400 and caught.value.code == 50035
    assert world.fake.posted_in(world.general) == []
