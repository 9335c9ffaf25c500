"""Replies in a queued run follow the run's reply ledger, seen from Discord: a worker (REST only, the real
discord.py client against the fake Discord) runs the same batch twice with an in-memory ledger standing in for
the Redis one, as a redelivered batch would. ``tests/fleet/test_e2e_idempotent*.py`` does it with Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest

import core
from core.entries import InputRef
from core.errors import ModelError
from core.fleet.reply_ledger import ReplySlot
from extensions.discord import ChannelArgs, discord_channel

from .conftest import StartBot, World, runtime_of, say

ANSWER = "The answer, written a few characters at a time so that it is shown while it is written."


class MemoryLedger:
    """A reply ledger for one batch, kept in memory: entries numbered in the order an attempt begins them
    (as the Redis one numbers them in each step), stored as JSON, so one attempt sees what an earlier one
    recorded."""

    def __init__(self) -> None:
        self.entries: dict[int, str] = {}
        self.history: list[dict[str, Any]] = []
        """Every entry as written, in order."""
        self.begun = 0
        self.valid = True

    def attempt(self) -> MemoryLedger:
        """The batch comes again."""
        self.begun = 0
        return self

    async def begin(self, output_type: str, content: str) -> ReplySlot:
        n, self.begun = self.begun, self.begun + 1
        stored = self.entries.get(n)
        if stored is None:
            slot = ReplySlot(key=f"batch:1.{n}", output_type=output_type, content=content)
            self.entries[n] = slot.dump()
            return slot
        return ReplySlot.load(f"batch:1.{n}", stored)

    async def posted(self, slot: ReplySlot, message_id: str | None = None, *, done: bool = True) -> None:
        if message_id is not None:
            slot.message_ids.append(message_id)
        slot.done = done
        self.entries[int(slot.key.rsplit(".", 1)[1])] = slot.dump()
        self.history.append(json.loads(slot.dump()))

    def stored(self) -> list[dict[str, Any]]:
        return [json.loads(self.entries[n]) for n in sorted(self.entries)]


async def answer_batch(agent: core.Agent, world: World, ledger: MemoryLedger, text: str = "hi") -> None:
    """Run the batch (the message ``text`` in the DM) as a queue worker does."""
    ref = InputRef(type="discord:message", data=text, params={"author": "alice", "message_id": "42"})
    await agent.run(discord_channel, ChannelArgs(channel_id=world.dm), [ref], ledger=ledger)


def message_posts(world: World) -> list[Any]:
    return [r.body for r in world.fake.requests if r.method == "POST" and r.path.endswith("/messages")]


@pytest.mark.parametrize("stream", [False, True], ids=["posted", "streamed"])
async def test_a_reply_delivered_by_an_earlier_attempt_is_left_alone(
    world: World, start_bot: StartBot, stream: bool
) -> None:
    model = core.ScriptedModel([say(ANSWER)], chunk_size=5, delay=0.002, repeat_last=True)
    agent = await start_bot(model, listen=False, stream_replies=stream, stream_interval=0.05)
    ledger = MemoryLedger()
    await answer_batch(agent, world, ledger)
    [reply] = world.fake.posted_in(world.dm)
    assert reply["content"] == ANSWER
    entries = ledger.stored()
    assert len(entries) == (2 if stream else 1)  # streamed: one entry before it is shown, one when complete
    assert all(e["done"] and e["ids"] == [reply["id"]] and e["content"] == ANSWER for e in entries)
    assert reply["nonce"] == ReplySlot(key="batch:1.0", output_type="", content="").part_nonce(0)
    versions = world.fake.versions_of(reply)

    await answer_batch(agent, world, ledger.attempt())  # the same batch again (the ack was lost)
    assert len(message_posts(world)) == 1 and world.fake.versions_of(reply) == versions  # nothing posted or edited
    assert len(ledger.stored()) == len(entries)


async def test_a_message_an_earlier_attempt_showed_is_finished_not_posted_again(
    world: World, start_bot: StartBot
) -> None:
    agent = await start_bot(
        core.ScriptedModel([say(ANSWER)], chunk_size=5, delay=0.002), listen=False, stream_interval=0.05
    )
    runtime = runtime_of(agent)
    # the worker that crashed: it stored the reply, showed its first words and recorded that message
    ledger = MemoryLedger()
    slot = await ledger.begin("discord:message", ANSWER[:12])
    shown = await runtime.send_message(channel_id=world.dm, text=ANSWER[:12], reply_to=None, nonce=slot.part_nonce(0))
    await ledger.posted(slot, str(shown), done=False)

    await answer_batch(agent, world, ledger.attempt())
    [reply] = world.fake.posted_in(world.dm)
    assert int(reply["id"]) == shown and reply["content"] == ANSWER  # finished in place
    assert len(message_posts(world)) == 1
    assert all(e["done"] and e["ids"] == [str(shown)] for e in ledger.stored())


async def test_a_reply_discord_stored_before_the_worker_heard_back_is_not_shown_twice(
    world: World, start_bot: StartBot
) -> None:
    agent = await start_bot(core.ScriptedModel([say(ANSWER)]), listen=False, stream_replies=False)
    runtime = runtime_of(agent)
    # the worker that crashed: it stored the reply and posted it; Discord kept the message, no record was made
    ledger = MemoryLedger()
    slot = await ledger.begin("discord:message", ANSWER)
    shown = await runtime.send_message(channel_id=world.dm, text=ANSWER, reply_to=None, nonce=slot.part_nonce(0))

    await answer_batch(agent, world, ledger.attempt())
    [reply] = world.fake.posted_in(world.dm)
    assert int(reply["id"]) == shown
    assert [p["nonce"] for p in message_posts(world)] == [slot.part_nonce(0)] * 2  # posted again, shown once
    [entry] = ledger.stored()
    assert entry["done"] and entry["ids"] == [str(shown)]


async def test_a_worker_that_lost_the_conversation_tells_nobody_its_run_failed(
    world: World, start_bot: StartBot
) -> None:
    agent = await start_bot(core.ScriptedModel([ModelError("the model is down")]), listen=False)
    ledger = MemoryLedger()
    ledger.valid = False  # its lease expired: the worker that took the conversation over answers
    await answer_batch(agent, world, ledger)
    assert message_posts(world) == []
