"""Stop across the fleet (issue 37), a gateway and a queue worker in this process on a real redis-server: a Stop the
gateway takes stops the run the worker holds; a Stop pressed before the worker took the batch makes it begin
stopped (recorded, not answered); a message sent after the Stop is answered; ``covers`` decides which batches a
recorded Stop covers; a Stop by someone the answer is not for is refused (issue 49)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from core import NotAllowedError, ScriptedModel
from core.engine import STOP_MARK
from core.fleet.stops import covers
from core.models.base import ModelRequest

from .conftest import send, wait_until
from .probe import ChatArgs, answer, chat, replies
from .server import RedisServer
from .test_worker import running_worker


class Endless(ScriptedModel):
    """Answers the first call a word at a time and never ends it (noting when it was cancelled), unless ``endless``
    is false; other calls as the probe does."""

    def __init__(self, *, endless: bool = True) -> None:
        super().__init__(answer)
        self.endless = endless
        self.started = asyncio.Event()
        self.cancelled_at: float | None = None
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:  # type: ignore[override]
        self.calls += 1
        if self.calls > 1 or not self.endless:
            async for chunk in super().stream(request):
                yield chunk
            return
        try:
            yield '<response><output type="probe:reply">the first words'
            self.started.set()
            while True:
                await asyncio.sleep(0.01)
                yield " and more"
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled_at = time.monotonic()
            raise


async def test_a_stop_taken_by_the_gateway_stops_the_run_the_worker_holds(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    model = Endless()
    async with running_worker(redis_server, model=model):
        await send(gateway, "s1", "tell me everything")
        await asyncio.wait_for(model.started.wait(), 30)
        pressed = time.monotonic()
        assert await gateway.request_stop(gateway.context_id(chat, ChatArgs(chat="s1"))) is True
        await wait_until(lambda: model.cancelled_at is not None, timeout=10, what="the model call cancelled")
        assert model.cancelled_at is not None and model.cancelled_at - pressed < 1.0
        await wait_until(lambda: replies(client, "s1"), what="the stopped answer delivered")
        [said] = await replies(client, "s1")
        assert said.startswith("the first words") and said.endswith(STOP_MARK)

        await send(gateway, "s1", "and now?")  # the next message is answered as usual
        await wait_until(lambda: _len_at_least(client, "s1", 2), what="the answer to the message after the stop")
    assert (await replies(client, "s1"))[1] == "and now?"
    assert await client.llen("bots:{probe:chat:s1}:inbox") == 0


async def test_a_stop_pressed_before_any_worker_took_the_batch_makes_it_begin_stopped(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    model = Endless(endless=False)
    cid = gateway.context_id(chat, ChatArgs(chat="s2"))
    await send(gateway, "s2", "one")
    await send(gateway, "s2", "two")
    assert await gateway.request_stop(cid) is True  # no worker yet: both wait in the inbox
    async with running_worker(redis_server, model=model):
        await wait_until(lambda: _inbox_and_batch_empty(client, cid), what="the stopped batch acknowledged")
        assert model.calls == 0 and await replies(client, "s2") == []
        await send(gateway, "s2", "three")  # sent after the Stop: answered, the stopped ones seen with it
        await wait_until(lambda: _len_at_least(client, "s2", 1), what="the answer after the stop")
    assert await replies(client, "s2") == ["three"]
    assert model.calls == 1


async def test_nothing_to_stop_says_so(redis_server: RedisServer, gateway: Any) -> None:
    assert await gateway.request_stop(gateway.context_id(chat, ChatArgs(chat="idle"))) is False


def test_a_recorded_stop_covers_the_batch_held_then_and_what_waited_then() -> None:
    assert covers("7|", "7", [{"t": 5.0}])
    assert not covers("7|", "8", [{"t": 5.0}])
    assert covers("|10.5", "8", [{"t": 9.0}, {"t": 10.5}])
    assert not covers("|10.5", "8", [{"t": 9.0}, {"t": 10.6}])  # an input sent after the press: answered
    assert covers("7|10.5", "8", [{"t": 10.0}])
    assert not covers(None, "1", [{"t": 1.0}]) and not covers("", "1", [{"t": 1.0}])
    assert not covers("|not a time", "1", [{"t": 1.0}])


async def _len_at_least(client: Any, chat_key: str, count: int) -> bool:
    return len(await replies(client, chat_key)) >= count


async def _inbox_and_batch_empty(client: Any, cid: str) -> bool:
    base = f"bots:{{{cid}}}:"
    return await client.llen(base + "inbox") == 0 and not await client.exists(base + "batch")


async def _send_as(gateway: Any, chat_key: str, text: str, user: str) -> None:
    await gateway.send(
        chat, ChatArgs(chat=chat_key), {"type": "probe:message", "data": text, "params": {"user_id": user}}
    )


async def test_only_the_asker_stops_the_batch_a_worker_holds(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    """Issue 49, point 6: a Stop by someone the answer is not for (``by``) is refused and changes nothing; the
    asker's stops the run on the worker."""
    model = Endless()
    cid = gateway.context_id(chat, ChatArgs(chat="s3"))
    async with running_worker(redis_server, model=model):
        await _send_as(gateway, "s3", "tell me everything", "alice")
        await asyncio.wait_for(model.started.wait(), 30)
        for _ in range(2):
            with pytest.raises(NotAllowedError):
                await gateway.request_stop(cid, by="probe:bob")
        assert model.cancelled_at is None and not await client.exists(f"bots:{{{cid}}}:stop")
        assert await gateway.request_stop(cid, by="probe:alice") is True
        await wait_until(lambda: model.cancelled_at is not None, timeout=30, what="the model call cancelled")
        await wait_until(lambda: replies(client, "s3"), what="the stopped answer delivered")
        [said] = await replies(client, "s3")
        assert said.endswith(STOP_MARK)


async def test_inputs_waiting_are_stopped_by_their_author_only_when_all_are_theirs(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    cid = gateway.context_id(chat, ChatArgs(chat="s4"))
    await _send_as(gateway, "s4", "one", "alice")
    with pytest.raises(NotAllowedError):
        await gateway.request_stop(cid, by="probe:bob")
    await _send_as(gateway, "s4", "two", "bob")
    for user in ("alice", "bob"):  # each would silence the other's question
        with pytest.raises(NotAllowedError):
            await gateway.request_stop(cid, by=f"probe:{user}")
    assert not await client.exists(f"bots:{{{cid}}}:stop")
    assert await gateway.request_stop(cid) is True  # the chat's admin
    assert await client.exists(f"bots:{{{cid}}}:stop")
    assert await gateway.request_stop(gateway.context_id(chat, ChatArgs(chat="idle2")), by="probe:bob") is False


async def test_the_stop_channel_warns_once_per_outage_and_says_when_it_is_back(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """While Redis is down the listener subscribes again every half second; it warns once, not at each try (a
    minute's outage once logged 120 warnings per process), and once more when it is subscribed again."""
    from core.fleet import FleetStops, RedisBackend

    from .conftest import queue_config

    backend = RedisBackend(queue_config(redis_server))
    stops = FleetStops(backend)
    pressed: list[str] = []
    listening = asyncio.create_task(stops.listen(pressed.append))
    try:
        await asyncio.wait_for(stops.subscribed.wait(), 10)
        with caplog.at_level("DEBUG", logger="core.fleet"):
            redis_server.stop()
            await wait_until(lambda: not stops.subscribed.is_set(), what="the channel lost")
            await asyncio.sleep(2.0)  # several tries while Redis is down
            redis_server.start()
            await asyncio.wait_for(stops.subscribed.wait(), 20)
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len([w for w in warnings if "lost Redis" in w]) == 1, warnings
        assert len([w for w in warnings if "subscribed again" in w]) == 1, warnings
        assert len([r for r in caplog.records if "still cannot subscribe" in r.getMessage()]) >= 2
        await backend.client.publish(backend.keys.stops, "ctx-1")
        await wait_until(lambda: pressed == ["ctx-1"], what="a Stop after the outage heard")
    finally:
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
        await backend.close()
