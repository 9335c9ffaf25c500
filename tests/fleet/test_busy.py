"""Bursts and busy conversations in the fleet (issue 37, ``core.busy``), a gateway in this process and queue workers on
a real redis-server: a burst within the quiet window is one batch, answered once, even when the worker holding the
window dies; each busy policy (steer, collect, queue, interrupt) does what it does in one process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from core import Agent, ModelRequest, ScriptedModel, create_agent
from core.engine import STOP_MARK
from core.fleet import RedisBackend, RedisDispatcher, RedisMemoryStore
from extensions.chat.commands import Caller, ChatCommands

from .conftest import Workers, queue_config, send, wait_until
from .probe import answer, probe_extension, replies
from .server import RedisServer
from .test_stops import Endless
from .test_worker import running_worker

BURST = ("hi", "one question", "about Redis", "and pub/sub", "thanks")


@contextlib.asynccontextmanager
async def gateway_with(server: RedisServer, **config: Any) -> AsyncIterator[Agent]:
    """What ``bots gateway`` is, with its ``BOT_QUIET_MS`` / ``BOT_BUSY``."""
    backend = RedisBackend(queue_config(server, inbox_cap=100_000, **config))
    agent = create_agent(
        model=ScriptedModel(answer),
        extensions=[probe_extension(server.url)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    async with agent:
        yield agent
    await backend.close()


BURST_WINDOW_MS = 1500
"""The quiet window the bursts are sent within: five sends through the gateway take milliseconds, but at load 13 they
once took longer than the 400 ms these tests had, and the burst became two batches."""


async def test_five_messages_within_the_quiet_window_get_one_answer(redis_server: RedisServer, client: Any) -> None:
    model = ScriptedModel(answer)
    async with (
        gateway_with(redis_server, quiet_ms=BURST_WINDOW_MS) as gateway,
        running_worker(redis_server, model=model, quiet_ms=BURST_WINDOW_MS) as worker,
    ):
        for text in BURST:
            await send(gateway, "q1", text)
        await wait_until(lambda: replies(client, "q1"), what="the answer to the burst")
        await asyncio.sleep(0.2)
        assert worker.stats.batches == 1
    assert await posts(client, "q1") == ["|".join(BURST)]
    assert len(model.requests) == 1


async def test_a_worker_killed_during_the_quiet_window_loses_none(
    redis_server: RedisServer, client: Any, workers: Workers
) -> None:
    async with gateway_with(redis_server, quiet_ms=3000) as gateway:
        first = workers.start("--quiet-ms", "3000", "--lease", "1")
        await wait_until(lambda: _connected(client, first.pid), what="the first worker connected")
        for text in BURST:
            await send(gateway, "q2", text)
        base = "bots:{probe:chat:q2}:"
        await wait_until(lambda: client.exists(base + "lease"), what="a worker holding the window")
        assert await client.llen(base + "inbox") == len(BURST)  # nothing taken while the window is open
        first.kill()
        first.wait()
        workers.start("--quiet-ms", "3000", "--lease", "1")
        await wait_until(lambda: replies(client, "q2"), what="the answer after the takeover")
        await asyncio.sleep(0.3)
    assert await posts(client, "q2") == ["|".join(BURST)]


def shown_then_gated(started: asyncio.Event, release: asyncio.Event) -> ScriptedModel:
    """A model whose answer's first word is written (shown) before it waits for ``release``: a message sent then
    meets an answer already visible, so the busy policy decides (before it, the call starts again: ``core.busy``)."""

    class ShownFirst(ScriptedModel):
        async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
            text = answer(request)
            cut = text.find('">') + 3 if '">' in text else len(text)
            yield text[:cut]
            started.set()
            await release.wait()
            if text[cut:]:
                yield text[cut:]

    return ShownFirst(answer)


def gated_counting(started: asyncio.Event, release: asyncio.Event, prompts: list[str]) -> ScriptedModel:
    """``gated`` (nothing shown before ``release``) that keeps the prompt of every call, the calls started again
    included."""

    class Counting(ScriptedModel):
        async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
            prompts.append(request.prompt)
            started.set()
            await release.wait()
            async for chunk in super().stream(request):
                yield chunk

    return Counting(answer)


async def busy_exchange(
    server: RedisServer,
    client: Any,
    policy: str,
    chat_key: str,
    *,
    default: str | None = None,
    shown: bool = True,
) -> tuple[list[str], Any]:
    """``one`` starts an answer the model holds back (``shown``: after its first word is shown); ``two`` and
    ``three`` are sent meanwhile; then it is let go. ``default``: the operator's policy (``BOT_BUSY`` of the gateway
    and the worker), and ``policy`` the conversation's own (``/busy`` on the gateway)."""
    started, release = asyncio.Event(), asyncio.Event()
    prompts: list[str] = []
    model = shown_then_gated(started, release) if shown else gated_counting(started, release, prompts)
    async with (
        gateway_with(server, busy=default or policy) as gateway,
        running_worker(server, model=model, busy=default or policy) as worker,
    ):
        if default is not None:
            await choose(gateway, chat_key, "busy", policy)
        await send(gateway, chat_key, "one")
        await asyncio.wait_for(started.wait(), 30)
        await send(gateway, chat_key, "two")
        await send(gateway, chat_key, "three")
        if policy == "steer" or not shown:  # they join the batch being run
            await wait_until(lambda: _inbox_empty(client, chat_key), what="the inputs joined to the running batch")
            if not shown:  # taken from the inbox is not yet read by the model: its call starts again with them
                await wait_until(lambda: any("three" in p for p in prompts), what="the model call started again")
        else:
            await asyncio.sleep(0.2)
            assert await client.llen(f"bots:{{probe:chat:{chat_key}}}:inbox") == 2
        release.set()
        expected = 1 if not shown else 2 if policy in ("steer", "collect") else 3
        await wait_until(lambda: _at_least(client, chat_key, expected), what="the answers")
        await wait_until(lambda: _inbox_empty(client, chat_key), what="everything acknowledged")
        await asyncio.sleep(0.2)
        stats = worker.stats
    return await posts(client, chat_key), stats


async def test_steer_the_messages_join_the_batch_running_and_its_next_step_reads_them(
    redis_server: RedisServer, client: Any
) -> None:
    said, stats = await busy_exchange(redis_server, client, "steer", "b1")
    assert said == ["one", "two|three"]
    assert stats.batches == 1 and stats.inputs == 3  # one batch, one run: they joined it


async def test_before_the_first_word_the_worker_starts_the_model_call_again_with_what_joined(
    redis_server: RedisServer, client: Any
) -> None:
    """Nothing of the answer shown yet: whatever the policy, what is stored meanwhile reaches the worker holding the
    conversation, joins its batch, and the model call starts again with all of it: one answer, one batch."""
    for policy, chat_key in (("steer", "r1"), ("collect", "r2"), ("queue", "r3")):
        said, stats = await busy_exchange(redis_server, client, policy, chat_key, shown=False)
        assert said == ["one|two|three"], policy
        assert stats.batches == 1 and stats.inputs == 3, policy


async def test_collect_the_messages_wait_and_the_next_batch_answers_them_together(
    redis_server: RedisServer, client: Any
) -> None:
    said, stats = await busy_exchange(redis_server, client, "collect", "b2")
    assert said == ["one", "two|three"]
    assert stats.batches == 2


async def test_queue_each_message_gets_a_run_of_its_own(redis_server: RedisServer, client: Any) -> None:
    said, stats = await busy_exchange(redis_server, client, "queue", "b3")
    assert said == ["one", "two", "three"]
    assert stats.batches == 3


async def test_interrupt_stops_the_answer_on_the_worker_and_answers_the_new_message(
    redis_server: RedisServer, client: Any
) -> None:
    model = Endless()
    async with (
        gateway_with(redis_server, busy="interrupt") as gateway,
        running_worker(redis_server, model=model, busy="interrupt"),
    ):
        await send(gateway, "b4", "tell me everything")
        await asyncio.wait_for(model.started.wait(), 30)
        await send(gateway, "b4", "no, tell me this")
        await wait_until(lambda: _at_least(client, "b4", 2), what="the stopped answer and the new one")
    first, second = await posts(client, "b4")
    assert first.startswith("the first words") and first.endswith(STOP_MARK)
    assert second == "no, tell me this"
    assert model.cancelled_at is not None


async def choose(gateway: Agent, chat_key: str, command: str, value: str) -> None:
    """A chat admin runs ``/<command> <value>`` in ``chat_key`` (served by the gateway, stored in Redis)."""
    commands = ChatCommands(gateway)
    answer = await commands.run(command, f"probe:chat:{chat_key}", Caller(user="probe:admin", manages_chat=True), value)
    assert answer.changed, answer.text


async def test_a_conversations_own_busy_policy_is_what_gateway_and_worker_do(
    redis_server: RedisServer, client: Any
) -> None:
    said, stats = await busy_exchange(redis_server, client, "queue", "b5", default="steer")
    assert said == ["one", "two", "three"]  # the operator's steer would have answered "two|three" in the batch
    assert stats.batches == 3
    said, stats = await busy_exchange(redis_server, client, "collect", "b6", default="steer")
    assert said == ["one", "two|three"] and stats.batches == 2
    said, stats = await busy_exchange(redis_server, client, "steer", "b7", default="collect")
    assert said == ["one", "two|three"]
    assert stats.batches == 1 and stats.inputs == 3  # joined the batch running, as the operator's collect would not


async def test_a_conversations_own_interrupt_stops_the_answer_on_the_worker(
    redis_server: RedisServer, client: Any
) -> None:
    model = Endless()
    async with gateway_with(redis_server, busy="steer") as gateway, running_worker(redis_server, model=model):
        await choose(gateway, "b8", "busy", "interrupt")
        await send(gateway, "b8", "tell me everything")
        await asyncio.wait_for(model.started.wait(), 30)
        await send(gateway, "b8", "no, tell me this")
        await wait_until(lambda: _at_least(client, "b8", 2), what="the stopped answer and the new one")
    first, second = await posts(client, "b8")
    assert first.endswith(STOP_MARK) and second == "no, tell me this"


async def test_a_conversations_own_quiet_window_makes_a_burst_one_batch(redis_server: RedisServer, client: Any) -> None:
    model = ScriptedModel(answer)
    async with gateway_with(redis_server) as gateway, running_worker(redis_server, model=model) as worker:
        await choose(gateway, "q3", "quiet", str(BURST_WINDOW_MS))  # (the operator's window is 0)
        for text in BURST:
            await send(gateway, "q3", text)
        await wait_until(lambda: replies(client, "q3"), what="the answer to the burst")
        await asyncio.sleep(0.2)
        assert worker.stats.batches == 1
        await choose(gateway, "q3", "quiet", "default")  # back to the operator's: each message at once
        for text in ("a", "b"):
            await send(gateway, "q3", text)
            await wait_until(lambda: _inbox_empty(client, "q3"), what="the message taken at once")
        await wait_until(lambda: _at_least(client, "q3", 3), what="the answers")
    assert (await posts(client, "q3"))[0] == "|".join(BURST)
    assert len(model.requests) >= 2


async def test_a_conversation_that_chose_nothing_costs_its_ingest_nothing_more(
    redis_server: RedisServer, client: Any
) -> None:
    """The ingest of a conversation without a choice notes no quiet window's times and publishes no arrival (the
    operator's collect, window 0): its own choices are read with fields the script reads anyway."""
    async with gateway_with(redis_server, busy="collect") as gateway:
        await send(gateway, "n1", "one")
        await send(gateway, "n1", "two")
        meta = await client.hgetall("bots:{probe:chat:n1}:meta")
        assert not {"qfirst", "qlast", "qms", "busy", "quiet"} & set(meta)
        await choose(gateway, "n1", "quiet", "800")
        await choose(gateway, "n1", "busy", "queue")
        assert (await client.hmget("bots:{probe:chat:n1}:meta", "busy", "quiet")) == ["queue", "800"]
        await send(gateway, "n1", "three")
        assert (await client.hget("bots:{probe:chat:n1}:meta", "qms")) == "800"
        await choose(gateway, "n1", "busy", "default")
        assert (await client.hget("bots:{probe:chat:n1}:meta", "busy")) is None


async def _connected(client: Any, pid: int) -> bool:
    """The worker process ``pid`` is connected to Redis (it blocks on the queue once it is)."""
    return any(c.get("name") == f"probe-worker-{pid}" for c in await client.client_list())


async def posts(client: Any, chat_key: str) -> list[str]:
    """What was posted in ``chat_key``, one item per reply (``replies`` splits a reply to several messages)."""
    found: list[str] = await client.lrange(f"probe:replies:{chat_key}", 0, -1)
    return found


async def _inbox_empty(client: Any, chat_key: str) -> bool:
    return await client.llen(f"bots:{{probe:chat:{chat_key}}}:inbox") == 0


async def _at_least(client: Any, chat_key: str, count: int) -> bool:
    return len(await posts(client, chat_key)) >= count
