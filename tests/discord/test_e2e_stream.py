"""End to end: answers shown while they are written (posted, then edited), through the real discord.py client,
the fake Discord and a scripted model that streams slowly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import core
from core.errors import ModelError
from extensions.chat.split import split_message
from tests.fakes.discord_server import Json

from .conftest import StartBot, World, runtime_of, say

INTERVAL = 0.1
"""DISCORD_STREAM_INTERVAL in these tests."""
ANSWER = (
    "Streaming works like this: the first words are posted at once, then the message is edited while "
    "the model writes, and the end is **exact**."
)


def slow(text: str, *, chunk_size: int = 4, delay: float = 0.01) -> core.ScriptedModel:
    """A model that writes ``text`` a few characters at a time."""
    return core.ScriptedModel([say(text)], chunk_size=chunk_size, delay=delay, repeat_last=True)


class Gated(core.ScriptedModel):
    """``slow``, held at a third and at two thirds of its answer until the chat has seen one, then two updates more
    (``updates``) since it started writing: the user sees the answer grow however slow the round trips are (the
    gate gives up after 30 s: the test's assertion says what was missed)."""

    def __init__(self, text: str, seen: Callable[[], int], *, chunk_size: int = 4, delay: float = 0.01) -> None:
        super().__init__([say(text)], chunk_size=chunk_size, delay=delay, repeat_last=True)
        self.length = len(say(text))
        self.seen = seen

    async def stream(self, request: core.ModelRequest) -> AsyncIterator[str]:
        base, written, gate = self.seen(), 0, 1
        async for chunk in super().stream(request):
            if gate <= 2 and written >= self.length * gate / 3:
                deadline = time.monotonic() + 30
                while self.seen() < base + gate and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                gate += 1
            written += len(chunk)
            yield chunk


def updates(world: World) -> Callable[[], int]:
    """How many messages and edits the fake Discord took so far."""
    return lambda: sum(
        r.status == 200 and (r.method == "PATCH" or (r.method == "POST" and r.path.endswith("/messages")))
        for r in world.fake.requests
    )


async def answered(world: World, agent: core.Agent, expected: list[str]) -> list[Json]:
    """Wait until the DM shows exactly ``expected`` and the run is over; return the visible messages."""
    await world.fake.wait_until(lambda: [m["content"] for m in world.fake.visible_in(world.dm)] == expected)
    await runtime_of(agent).wait_idle()
    return list(world.fake.visible_in(world.dm))


def assert_rate_bound(world: World, message: Json) -> None:
    """At most one update per interval while streaming, plus the final edit (an upper bound only)."""
    times = [at for at, _ in world.fake.versions[int(message["id"])]]
    assert len(times) <= (times[-1] - times[0]) / INTERVAL + 2, (len(times), times[-1] - times[0])


def message_posts(world: World) -> list[int]:
    return [r.status for r in world.fake.requests if r.method == "POST" and r.path.endswith("/messages")]


def message_edits(world: World) -> list[int]:
    return [r.status for r in world.fake.requests if r.method == "PATCH"]


async def test_the_answer_appears_as_it_is_written(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(Gated(ANSWER, updates(world)), stream_interval=INTERVAL)
    asked = await world.fake.say(world.dm, "how does streaming work?", author=world.alice)
    [reply] = await answered(world, agent, [ANSWER])
    versions = world.fake.versions_of(reply)
    assert len(versions) >= 3, "the user saw at least two versions before the final one"
    assert all(ANSWER.startswith(v) for v in versions)
    assert reply["message_reference"]["message_id"] == asked["id"]
    assert reply["mentions"] == []
    assert_rate_bound(world, reply)
    assert world.fake.unchanged_edits == 0
    assert message_posts(world) == [200]


async def test_a_long_answer_continues_in_a_second_message(world: World, start_bot: StartBot) -> None:
    paragraph = "A paragraph of a long answer, written a few words at a time so the message grows. " * 5
    text = "\n\n".join(f"{n}. {paragraph}" for n in range(6))
    assert len(text) > 2000
    agent = await start_bot(Gated(text, updates(world), chunk_size=60), stream_interval=INTERVAL)
    asked = await world.fake.say(world.dm, "tell me everything", author=world.alice)
    expected = [chunk.strip() for chunk in split_message(text, 2000)]
    messages = await answered(world, agent, expected)
    assert len(messages) >= 2
    assert messages[0]["message_reference"]["message_id"] == asked["id"]
    assert all("message_reference" not in m for m in messages[1:])
    assert len(world.fake.versions_of(messages[0])) >= 2, "the first message grew while the answer was written"
    for message in messages:
        assert_rate_bound(world, message)
    assert world.fake.unchanged_edits == 0


async def test_a_429_on_an_edit_is_waited_out_and_the_end_is_exact(world: World, start_bot: StartBot) -> None:
    world.fake.rate_limit("PATCH", rf"/channels/{world.dm}/messages/\d+", retry_after=0.05)
    agent = await start_bot(slow(ANSWER), stream_interval=INTERVAL)
    await world.fake.say(world.dm, "hello", author=world.alice)
    await answered(world, agent, [ANSWER])
    assert 429 in message_edits(world)
    assert world.fake.rate_limits[0].served == 1


async def test_edits_refused_to_the_end_still_deliver_the_exact_text(world: World, start_bot: StartBot) -> None:
    world.fake.rate_limit("PATCH", rf"/channels/{world.dm}/messages/\d+", retry_after=0.01, times=1000)
    agent = await start_bot(slow(ANSWER), stream_interval=INTERVAL)
    await world.fake.say(world.dm, "hello", author=world.alice)
    [reply] = await answered(world, agent, [ANSWER])
    assert world.fake.versions_of(reply) == [ANSWER]  # the final text came as a new message
    assert len(world.fake.deleted) == 1  # and the stale one was removed
    assert set(message_edits(world)) == {429}


async def test_with_streaming_off_the_answer_is_posted_once(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(slow(ANSWER), stream_interval=INTERVAL, stream_replies=False)
    await world.fake.say(world.dm, "hello", author=world.alice)
    [reply] = await answered(world, agent, [ANSWER])
    assert world.fake.versions_of(reply) == [ANSWER]
    assert message_posts(world) == [200] and message_edits(world) == []


class FailsMidway:
    """Writes the start of an answer slowly, then the model connection breaks."""

    name = "fails-midway"
    model = ""
    vision = False
    last_usage = None

    async def stream(self, request: core.ModelRequest) -> AsyncIterator[str]:
        for chunk in ('<response><output type="discord:message">', "The answer st", "arts like this and"):
            yield chunk
            await asyncio.sleep(INTERVAL * 1.5)
        raise ModelError("the model server went away")


async def test_an_answer_cut_by_a_failed_run_is_marked(world: World, start_bot: StartBot) -> None:
    agent = await start_bot(FailsMidway(), stream_interval=INTERVAL)
    await world.fake.say(world.dm, "hello", author=world.alice)
    error = runtime_of(agent).settings.error_message
    partial, notice = await answered(world, agent, ["The answer starts like this and …", error])
    assert world.fake.versions_of(partial)[0].startswith("The answer st")
    assert notice["message_reference"]["message_id"] == partial["message_reference"]["message_id"]
