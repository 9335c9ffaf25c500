"""``Poller``, the queue gateway's long polling, against the fake Bot API with the real PTB ``Bot``: the
offset Telegram is sent moves past an update only once ``handle`` returned for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from telegram import Bot, Update
from telegram.error import InvalidToken

from extensions.telegram.poller import Poller
from tests.fakes.telegram_server import FakeTelegramServer


class Handler:
    """``handle`` for a poller: records the update ids, and holds those in ``held`` until released."""

    def __init__(self, *held: int) -> None:
        self.seen: list[int] = []
        self.held = set(held)
        self.release = asyncio.Event()
        self._changed = asyncio.Event()

    async def __call__(self, update: Update) -> None:
        self.seen.append(update.update_id)
        self._changed.set()
        if update.update_id in self.held:
            await self.release.wait()

    async def wait_for(self, update_id: int) -> None:
        async with asyncio.timeout(10):
            while update_id not in self.seen:
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
async def bot(server: FakeTelegramServer) -> AsyncIterator[Bot]:
    b = Bot(server.token, base_url=server.base_url)
    await b.initialize()
    try:
        yield b
    finally:
        await b.shutdown()


def offsets(server: FakeTelegramServer) -> list[int]:
    return [int(c.params.get("offset") or 0) for c in server.calls_of("getUpdates")]


def poller_for(bot: Bot, handle: Any) -> Poller:
    return Poller(bot, handle, timeout=10, allowed_updates=("message",), on_invalid_token=lambda exc: None)


async def test_the_offset_moves_past_an_update_only_once_it_was_handled(server: FakeTelegramServer, bot: Bot) -> None:
    first = server.user_says("one", user_id=1)["update_id"]
    second = server.user_says("two", user_id=2)["update_id"]
    handle = Handler(second)
    poller = poller_for(bot, handle)
    await poller.bootstrap(drop_pending_updates=False)
    poller.start()
    try:
        await handle.wait_for(second)  # the first is handled, the second is being handled
        assert offsets(server) == [0] and poller.offset == first + 1
        assert [u["update_id"] for u in server.pending] == [first, second]  # Telegram still holds both
        handle.release.set()
        await server.wait_for(lambda: offsets(server)[-1] == second + 1)
        assert server.pending == []
    finally:
        await poller.stop(timeout=1)
    assert handle.seen == [first, second] and server.served == {first: 1, second: 1}


async def test_a_stop_gives_the_batch_a_bounded_time_and_confirms_only_what_was_handled(
    server: FakeTelegramServer, bot: Bot
) -> None:
    ids = [server.user_says(f"message {u}", user_id=u)["update_id"] for u in (1, 2, 3)]
    handle = Handler(ids[1])  # never released: storing it never succeeds
    poller = poller_for(bot, handle)
    poller.start()
    await handle.wait_for(ids[1])
    await poller.stop(timeout=0.05)
    assert not poller.running
    last = server.calls_of("getUpdates")[-1]
    assert int(last.params["offset"]) == ids[1] and not last.params.get("timeout")  # the first one confirmed
    assert [u["update_id"] for u in server.pending] == ids[1:]  # for the next poller
    assert handle.seen == ids[:2]


async def test_a_stop_between_batches_ends_the_long_poll_and_sends_nothing_more(
    server: FakeTelegramServer, bot: Bot
) -> None:
    handle = Handler()
    poller = poller_for(bot, handle)
    poller.start()
    server.user_says("hi")
    await server.wait_for(lambda: len(server.calls_of("getUpdates")) == 2)  # the second long poll confirms it
    await poller.stop(timeout=5)
    assert len(server.calls_of("getUpdates")) == 2 and server.pending == []


async def test_a_refused_token_ends_polling_and_is_reported(server: FakeTelegramServer, bot: Bot) -> None:
    refused: list[InvalidToken] = []
    reported = asyncio.Event()

    def on_invalid_token(exc: InvalidToken) -> None:
        refused.append(exc)
        reported.set()

    poller = Poller(bot, Handler(), timeout=10, allowed_updates=("message",), on_invalid_token=on_invalid_token)
    server.token = "123456:another-token"
    poller.start()
    try:
        async with asyncio.timeout(10):
            await reported.wait()
    finally:
        await poller.stop(timeout=1)
    assert len(refused) == 1 and len(server.calls_of("getUpdates")) == 1  # not tried again


async def test_while_an_update_is_answered_the_next_one_of_a_burst_is_fetched_soon_not_after_the_busy_interval(
    server: FakeTelegramServer, bot: Bot
) -> None:
    """The first message is handled in the background (an answer being written: Telegram keeps it, and every later
    update, unconfirmed); the poller looks again ``burst_look`` seconds after a look that found something, doubling
    up to ``busy_interval``, so the rest of a burst reaches the run before the answer begins (issue 51). With a
    ``busy_interval`` longer than the test's deadline, only the quick looks can fetch the second message."""
    answered = asyncio.Event()
    seen: list[int] = []
    changed = asyncio.Event()

    async def handle(update: Update) -> asyncio.Task[None]:
        seen.append(update.update_id)
        changed.set()
        return asyncio.create_task(answered.wait())  # (awaited by the poller, cancelled by its stop)

    poller = Poller(
        bot,
        handle,
        timeout=10,
        allowed_updates=("message",),
        on_invalid_token=lambda exc: None,
        busy_interval=60.0,
        burst_look=0.01,
    )
    first = server.user_says("part one", user_id=1)["update_id"]
    poller.start()
    try:
        async with asyncio.timeout(20):
            while first not in seen:
                changed.clear()
                await changed.wait()
            second = server.user_says("part two", user_id=1)["update_id"]
            while second not in seen:
                changed.clear()
                await changed.wait()
        assert poller.in_background == 2 and [u["update_id"] for u in server.pending] == [first, second]
        answered.set()
        await server.wait_for(lambda: poller.in_background == 0)
        # the next look confirms them (a stop that cut it short before Telegram had it would leave them to the
        # next start, which fetches and drops them)
        await server.wait_for(lambda: server.pending == [])
    finally:
        await poller.stop(timeout=1)
    assert seen == [first, second] and server.pending == []
