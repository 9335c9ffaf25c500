"""A message for a full inbox, on any platform: it waits for room, and the chat is told when the bot is busy.

In front of a queue (``bots gateway``), ``agent.send`` stores a message in its conversation's inbox in Redis, and
refuses it with ``BackpressureError`` when that inbox already holds ``REDIS_INBOX_CAP`` messages. The operator chose
what happens then (``REDIS_INBOX_FULL``, carried by the error as ``wait``):

- ``wait`` (the default): the message is kept in a task of this process and offered again, with backoff, for up to
  ``REDIS_INBOX_WAIT`` seconds; the chat's later messages wait behind it, so they keep their order, while the other
  chats go on. Past the wait it is dropped with the busy notice. At most ``MAX_HELD`` messages of one chat wait;
  more are dropped at once.
- ``drop``: the message is dropped at once with the busy notice; a chat found full is taken as still full for
  ``FULL_MEMO`` seconds, so a flood costs no Redis round trip per message.

The busy notice ("I'm answering too many messages right now...", ``say("busy", language)`` of
``extensions.chat.i18n``, in the chat's language) is posted at most once per ``BUSY_NOTICE_EVERY`` seconds per chat;
every dropped message is counted (``message_ignored:busy``). What waits lives in this process only: if it dies,
those extra messages of a flooded chat are lost (nothing of the other chats).

The adapter describes each message as an ``Incoming`` (how to store it, how to tell its chat the bot is busy, what
to do once it is stored or dropped) and hands it to ``Backpressure.submit``, which returns once the message is
stored, kept waiting in the background, or dropped. Usage (an adapter's listener, in front of a queue)::

    from extensions.chat import Backpressure, Ignored, Incoming, MessageTasks

    tasks = MessageTasks(log)                 # owns the waiting tasks; ``tasks.close`` ends them at stop
    backpressure = Backpressure(tasks=tasks)

    async def on_message(message) -> None:   # a person's message the adapter decided to answer
        key = f"myplatform:{message.id}"

        async def store() -> None:
            await send(my_context, args, ref, dedupe_key=key)  # raises BackpressureError when full

        async def tell_busy() -> None:       # a reply to the message, in the chat's language
            await post(message.channel, say("busy", await language_of(message.channel)), reply_to=message.id)

        await backpressure.submit(
            Incoming(
                chat=message.channel_id,
                key=key,
                what=f"message {message.id} in channel {message.channel_id}",
                store=store,
                tell_busy=tell_busy,
                on_dropped=lambda: metrics.ignored(my_context, args, Ignored.BUSY),
            )
        )

``submit`` raises what ``store`` raised when the queue could not be reached (``DispatchError``,
``MemoryStoreError``): nothing was kept, and the adapter tries again or gives up as its platform allows (Telegram's
poller tries again and keeps the update unconfirmed meanwhile). It raises nothing for a full inbox. Embedded (the
in-process dispatcher) nothing waits: an adapter tells the chat it is busy at once, without this module.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from core.errors import BackpressureError, DispatchError, MemoryStoreError

from .tasks import MessageTasks

__all__ = ("BUSY_NOTICE_EVERY", "FULL_MEMO", "MAX_HELD", "Backpressure", "Incoming")

MAX_HELD = 100
"""Messages of one chat kept waiting for room in its full inbox at most (``REDIS_INBOX_FULL=wait``); more are
dropped."""
FULL_MEMO = 0.25
"""Seconds a chat found with a full inbox is taken as still full (``REDIS_INBOX_FULL=drop``: dropped without
asking Redis, so a flood costs no round trip per message)."""
BUSY_NOTICE_EVERY = 60.0
"""Seconds before a chat whose messages are dropped for a full inbox is told again that the bot is busy."""
FIRST_BACKOFF = 0.05
"""Seconds before a waiting message is offered again after the inbox was full or Redis failed..."""
MAX_BACKOFF = 2.0
"""... doubling up to this (Redis calls retry by themselves for ``REDIS_RETRY_SECONDS`` before failing)."""
_PRUNE_AT = 10_000
"""Chats remembered (full a moment ago, told they are busy) before the stale ones are forgotten."""


def _nothing() -> None:
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Incoming:
    """One message an adapter hands to the agent, as ``Backpressure`` needs to know it."""

    chat: Hashable
    """The conversation whose inbox takes it (Telegram: ``(chat_id, thread_id)``; Discord: the channel id). The
    messages of one chat keep their order."""
    key: str
    """The message's correlation id (``telegram:<update id>``): the name of its task and of its log lines."""
    what: str
    """The message in log lines: ``message 5 in chat 200``."""
    store: Callable[[], Awaitable[None]]
    """Stores it in its inbox (``agent.send``): raises ``BackpressureError`` when the inbox is full,
    ``DispatchError`` or ``MemoryStoreError`` when the queue cannot be reached."""
    tell_busy: Callable[[], Awaitable[None]]
    """Tells its chat the bot is busy (``say("busy", language)``, best effort: a failure is the adapter's to log)."""
    on_dropped: Callable[[], object] = _nothing
    """Called when it is dropped for a full inbox (count ``Ignored.BUSY``)."""
    on_handled: Callable[[], object] = _nothing
    """Called once it is stored or dropped (the adapter may now take a redelivery of it as a duplicate)."""
    tell_failed: Callable[[], Awaitable[None]] | None = None
    """Tells its chat its answer failed (``say("run_failed", language)``); only ``ChatAdapter.run_here`` uses it
    (added after the first version of this module; optional, so nothing that built an ``Incoming`` changes)."""


class Backpressure:
    """The messages of one adapter that wait for room in a full inbox, and the chats told they are busy."""

    def __init__(
        self,
        *,
        tasks: MessageTasks,
        max_held: int = MAX_HELD,
        notice_every: float = BUSY_NOTICE_EVERY,
        full_memo: float = FULL_MEMO,
    ) -> None:
        self.tasks = tasks
        """Owns the tasks messages wait in (the adapter's, so its stop ends them); its logger gets the log lines."""
        self.max_held = max_held
        """Messages of one chat kept waiting at most."""
        self.notice_every = notice_every
        """Seconds between two busy notices to one chat."""
        self.full_memo = full_memo
        """Seconds a chat found full is taken as still full when messages are dropped at once."""
        self._last: dict[Hashable, asyncio.Task[None]] = {}
        self._count: dict[Hashable, int] = {}
        self._wait = 0.0
        self._full_at: dict[Hashable, float] = {}
        self._told: dict[Hashable, float] = {}

    def waiting(self, chat: Hashable) -> int:
        """How many messages of ``chat`` wait for room now."""
        return self._count.get(chat, 0)

    async def submit(self, message: Incoming) -> None:
        """Store ``message``, or keep it waiting in the background, or drop it with the busy notice; return then.

        A message of a chat whose earlier message still waits goes after it. Raises what ``message.store`` raised
        when the queue could not be reached (``DispatchError``, ``MemoryStoreError``): nothing was kept."""
        chat = message.chat
        ahead = self._last.get(chat)
        if ahead is not None:  # an earlier message of the chat waits for room: this one goes after it
            self._hold(message, after=ahead, wait=self._wait)
            return
        if self._wait == 0 and time.monotonic() - self._full_at.get(chat, -self.full_memo) < self.full_memo:
            self._hold(message, after=None, wait=0)  # full a moment ago: drop
            return
        try:
            await message.store()
        except BackpressureError as exc:
            self._wait = exc.wait
            now = time.monotonic()
            self._full_at[chat] = now
            if len(self._full_at) > _PRUNE_AT:
                self._full_at = {c: t for c, t in self._full_at.items() if now - t < self.full_memo}
            self._hold(message, after=None, wait=exc.wait)
            return
        message.on_handled()

    def _hold(self, message: Incoming, *, after: asyncio.Task[None] | None, wait: float) -> None:
        """Keep ``message`` in a task and offer it again for up to ``wait`` seconds, after the chat's earlier
        message still waiting, then drop it; drop it at once with ``wait`` 0 or when ``max_held`` messages of its
        chat wait already."""
        chat, key = message.chat, message.key
        if wait <= 0 or self._count.get(chat, 0) >= self.max_held:
            self.tasks.spawn(self.drop(message), name=f"{key}:busy", correlation=key)
            return
        deadline = time.monotonic() + wait

        async def held() -> None:
            try:
                if after is not None:
                    await asyncio.wait({after})
                delay = FIRST_BACKOFF
                while True:
                    try:
                        await message.store()
                    except BackpressureError:
                        if time.monotonic() >= deadline:
                            await self.drop(message)
                            return
                    except (DispatchError, MemoryStoreError) as exc:  # Redis is away: no deadline for that
                        self.tasks.log.debug("%s still not stored: %s", message.what, exc)
                    else:
                        message.on_handled()
                        return
                    await asyncio.sleep(max(0.0, min(delay, deadline - time.monotonic())))
                    delay = min(delay * 2, MAX_BACKOFF)
            except asyncio.CancelledError:
                self.tasks.log.warning(
                    "%s, kept for a full inbox, was not stored before the listener stopped: lost", message.what
                )
                raise
            finally:
                left = self._count.get(chat, 1) - 1
                if left > 0:
                    self._count[chat] = left
                else:
                    self._count.pop(chat, None)

        self._count[chat] = self._count.get(chat, 0) + 1
        task = self.tasks.spawn(held(), name=f"{key}:held", correlation=key)
        self._last[chat] = task
        task.add_done_callback(lambda t: self._last.pop(chat, None) if self._last.get(chat) is t else None)

    async def drop(self, message: Incoming) -> None:
        """Drop ``message`` for a full inbox; tell its chat the bot is busy (once per ``notice_every``)."""
        message.on_dropped()
        message.on_handled()
        self.tasks.log.warning("%s dropped: the chat's inbox is full", message.what)
        chat, now = message.chat, time.monotonic()
        if now - self._told.get(chat, -self.notice_every) < self.notice_every:
            return
        self._told[chat] = now
        if len(self._told) > _PRUNE_AT:
            self._told = {c: t for c, t in self._told.items() if now - t < self.notice_every}
        await message.tell_busy()
