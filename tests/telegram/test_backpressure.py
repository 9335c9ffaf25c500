"""``extensions.chat.backpressure`` on its own (the Telegram adapter's full-inbox holding, shared with Discord): a
message for a full inbox waits for room behind the chat's earlier ones, or is dropped with one busy notice."""

from __future__ import annotations

import asyncio
import logging

import pytest

from core.errors import BackpressureError, DispatchError
from extensions.chat import Backpressure, Incoming, MessageTasks


class Inbox:
    """A fake inbox of ``cap`` messages: ``store`` refuses past it with ``wait`` (``REDIS_INBOX_FULL``)."""

    def __init__(self, cap: int, *, wait: float) -> None:
        self.cap, self.wait = cap, wait
        self.stored: list[str] = []
        self.busy: list[str] = []
        self.dropped: list[str] = []
        self.handled: list[str] = []

    def message(self, text: str, *, chat: int = 1) -> Incoming:
        async def store() -> None:
            if len(self.stored) >= self.cap:
                raise BackpressureError("full", wait=self.wait)
            self.stored.append(text)

        async def tell_busy() -> None:
            self.busy.append(text)

        return Incoming(
            chat=chat,
            key=f"test:{text}",
            what=f"message {text}",
            store=store,
            tell_busy=tell_busy,
            on_dropped=lambda: self.dropped.append(text),
            on_handled=lambda: self.handled.append(text),
        )


@pytest.fixture
async def tasks() -> MessageTasks:
    return MessageTasks(logging.getLogger("tests.backpressure"))


async def test_a_message_for_a_full_inbox_waits_for_room_and_the_next_ones_keep_their_order(
    tasks: MessageTasks,
) -> None:
    inbox, backpressure = Inbox(1, wait=30.0), Backpressure(tasks=tasks)
    for text in ("one", "two", "three"):
        await backpressure.submit(inbox.message(text))
    assert inbox.stored == ["one"] and backpressure.waiting(1) == 2
    await backpressure.submit(inbox.message("elsewhere", chat=2))  # another chat is refused on its own
    inbox.cap = 10  # room again
    await tasks.wait()
    assert [t for t in inbox.stored if t != "elsewhere"] == ["one", "two", "three"]  # in order
    assert "elsewhere" in inbox.stored
    assert inbox.busy == [] and inbox.dropped == [] and backpressure.waiting(1) == 0
    assert sorted(inbox.handled) == ["elsewhere", "one", "three", "two"]


async def test_with_drop_a_full_inbox_drops_at_once_and_tells_the_chat_once(tasks: MessageTasks) -> None:
    inbox, backpressure = Inbox(1, wait=0.0), Backpressure(tasks=tasks)
    for text in ("one", "two", "three", "four"):
        await backpressure.submit(inbox.message(text))
    await tasks.wait()
    assert inbox.stored == ["one"]
    assert inbox.dropped == ["two", "three", "four"] and inbox.busy == ["two"]
    assert sorted(inbox.handled) == ["four", "one", "three", "two"]


async def test_past_max_held_messages_are_dropped(tasks: MessageTasks) -> None:
    inbox, backpressure = Inbox(0, wait=30.0), Backpressure(tasks=tasks, max_held=2)
    for text in ("one", "two", "three"):
        await backpressure.submit(inbox.message(text))
    assert backpressure.waiting(1) == 2
    for _ in range(10):  # the drop runs in its own task; the two kept wait for room
        await asyncio.sleep(0)
    assert inbox.dropped == ["three"] and inbox.busy == ["three"]
    await tasks.close(timeout=0)  # a stop: what waits is lost
    assert backpressure.waiting(1) == 0


async def test_a_queue_that_cannot_be_reached_is_the_adapters_to_retry(tasks: MessageTasks) -> None:
    async def down() -> None:
        raise DispatchError("Redis is down")

    backpressure = Backpressure(tasks=tasks)
    message = Inbox(1, wait=30.0).message("one")
    with pytest.raises(DispatchError):
        await backpressure.submit(
            Incoming(chat=1, key=message.key, what=message.what, store=down, tell_busy=message.tell_busy)
        )
    assert backpressure.waiting(1) == 0 and len(tasks) == 0
