"""Long polling that confirms an update to Telegram only once it was handled: the queue gateway's listener.

Telegram hands an update out again and again until a ``getUpdates`` call confirms it (an ``offset`` past
its id). PTB's ``Updater`` confirms a batch on its next call as soon as the updates sit in its in-memory
queue, whether or not they were stored anywhere: a gateway that dies, or whose Redis is down, between
fetching and storing them loses them. ``Poller`` hands the updates of a batch to ``handle`` one at a time,
in order; ``handle`` returns only once the update is stored in its conversation's inbox or deliberately
dropped (filtered out, a duplicate, answered by the gateway itself). Only then is the next batch asked
for, with the offset past it. A poller that dies holding a batch leaves it with Telegram: the next poller
(after a restart, or the standby gateway) fetches it again, and Redis drops what had already been stored
(the dedupe key is the update id).

Stopping: no new fetch (a long poll in progress is cancelled), the batch in hand gets a bounded time to
be handled, then, if that moved the offset, one ``getUpdates`` with ``timeout=0`` confirms it so a
graceful restart fetches nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError, TimedOut

from core.errors import BackpressureError, DispatchError, MemoryStoreError

__all__ = ("Poller", "until_stored")

log = logging.getLogger("extensions.telegram")

BOOTSTRAP_ATTEMPTS = 4
"""Tries of ``deleteWebhook`` before polling starts (what PTB's ``bootstrap_retries=3`` gives)."""
FIRST_BACKOFF = 1.0
"""Seconds before fetching again after a failed ``getUpdates``; grows 1.5 times per failure in a row..."""
MAX_BACKOFF = 30.0
"""... up to this."""
BUSY_INTERVAL = 0.1
"""Seconds between two looks for new updates while some are handled in the background, at most..."""
BURST_LOOK = 0.01
"""... and right after a look that found a new update: the wait doubles with each look that finds none, up to
``BUSY_INTERVAL``. A burst typed or pasted a few milliseconds apart reaches the run while its model call has not
written a word yet (the call is then started again with all of them: one answer), not a tenth of a second later,
after a fast model's answer to the first message alone was posted."""
FETCH_LIMIT = 100
"""Updates Telegram hands out per ``getUpdates`` at most (the default ``limit``)."""
STORE_FIRST_BACKOFF = 0.05
"""Seconds before storing an update again after Redis failed or the inbox was full..."""
STORE_MAX_BACKOFF = 2.0
"""... doubling up to this (Redis calls retry by themselves for ``REDIS_RETRY_SECONDS`` before failing)."""


async def bootstrap_call(what: str, call: Callable[[], Awaitable[object]]) -> None:
    """``call()`` tried ``BOOTSTRAP_ATTEMPTS`` times a second apart, as PTB's bootstrap does; a refused
    token is not retried; the last ``TelegramError`` is raised."""
    for attempt in range(1, BOOTSTRAP_ATTEMPTS + 1):
        try:
            await call()
            return
        except InvalidToken:
            raise
        except TelegramError as exc:
            if attempt == BOOTSTRAP_ATTEMPTS:
                raise
            log.debug("%s failed (%s); trying again", what, exc.message)
        await asyncio.sleep(1.0)


class Poller:
    """``getUpdates`` in a loop; the offset moves past an update only once ``handle`` is done with it.

    ``handle(update)`` is awaited for each update in order. It returns None once the update is handled, or
    an awaitable that finishes when it is (the update is handled in the background: an answer being written
    in the embedded mode, a message waiting for room in a full inbox in front of a queue). The offset sent
    to Telegram is the first update not handled yet, so updates handled in the background keep every later
    one unconfirmed too; meanwhile the poller looks for new updates (Telegram hands back the unconfirmed ones
    each time: they are skipped) ``burst_look`` seconds after a look that found one, then less often, up to
    every ``busy_interval`` seconds, so one slow conversation does not hold up the others and the rest of a
    burst joins its first message before the answer begins. Telegram hands out at most 100 updates from the
    offset: if that many are unconfirmed, new ones wait until the oldest is handled."""

    def __init__(
        self,
        bot: Bot,
        handle: Callable[[Update], Awaitable[Awaitable[None] | None]],
        *,
        timeout: int,
        allowed_updates: Sequence[str],
        on_invalid_token: Callable[[InvalidToken], None],
        busy_interval: float = BUSY_INTERVAL,
        burst_look: float = BURST_LOOK,
    ) -> None:
        self.bot = bot
        """The bot that fetches."""
        self.handle = handle
        """Called for each update, in order; returns None once the update is handled, or an awaitable that
        finishes when it is."""
        self.timeout = timeout
        """Seconds one long poll may wait (``TELEGRAM_POLL_TIMEOUT``)."""
        self.allowed_updates = tuple(allowed_updates)
        """The update types asked for."""
        self.on_invalid_token = on_invalid_token
        """Told when Telegram refuses the token while polling (polling has ended)."""
        self.busy_interval = busy_interval
        """Seconds between two looks for new updates while some are handled in the background, at most."""
        self.burst_look = burst_look
        """Seconds before the next look after one that found a new update (doubling up to ``busy_interval``)."""
        self.offset: int | None = None
        """The first update id not handled yet (None: start from what Telegram holds)."""
        self.sent_offset: int | None = None
        """The offset of the last ``getUpdates`` sent: Telegram forgot every update below it."""
        self._task: asyncio.Task[None] | None = None
        self._handling = False
        self._stopping = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._next: int | None = None
        self._background: dict[int, asyncio.Future[None]] = {}
        self._handled: set[int] = set()
        self._finished = asyncio.Event()
        self._look = burst_look

    @property
    def running(self) -> bool:
        """The loop runs (it may be waiting out an error)."""
        return self._task is not None and not self._task.done()

    @property
    def in_background(self) -> int:
        """Updates being handled in the background (they and every later one are not confirmed yet)."""
        return len(self._background)

    async def bootstrap(self, *, drop_pending_updates: bool) -> None:
        """Make sure no webhook is set (``getUpdates`` is refused while one is) and, if asked, drop the
        updates waiting at Telegram. Retried like PTB's bootstrap; raises the last ``TelegramError``."""
        await bootstrap_call(
            "deleteWebhook", lambda: self.bot.delete_webhook(drop_pending_updates=drop_pending_updates)
        )

    def start(self) -> None:
        """Start polling in a task this poller owns (``stop`` ends it)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="telegram:poller")

    async def stop(self, *, timeout: float) -> None:
        """Fetch no more; give the updates in hand ``timeout`` seconds to be handled (then cancel the rest:
        they stay with Telegram); confirm what was handled."""
        task, self._stopping = self._task, True
        if task is None:
            return
        deadline = time.monotonic() + timeout
        if self._handling:
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                log.warning("stopping: updates still being handled after %.1fs are left to the next poller", timeout)
        task.cancel()  # a long poll (or a wait after an error): nothing to lose
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if not task.cancelled() and task.exception() is not None:
            log.error("polling failed", exc_info=task.exception())
        if self._background:
            _, left = await asyncio.wait(set(self._background.values()), timeout=max(0.0, deadline - time.monotonic()))
            if left:
                log.warning("stopping: %d updates not handled yet are left to the next poller", len(left))
                self._advance()  # the offset stays below them
                self._background.clear()
                for future in left:
                    future.cancel()
                await asyncio.wait(left)
        self._idle.set()
        await self._confirm()

    async def wait_idle(self) -> None:
        """Return once no fetched update is waiting to be handled."""
        while True:
            await self._idle.wait()
            if not self._background:
                return
            await asyncio.wait(set(self._background.values()))

    # -- the loop --------------------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = 0.0
        while not self._stopping:
            busy = bool(self._background)
            if busy:  # look for new updates now and then, not in a long poll (it would return at once)
                await self._changes(self._look)
            try:
                updates = await self._fetch(0 if self._background else self.timeout)
            except InvalidToken as exc:
                self.on_invalid_token(exc)
                return
            except RetryAfter as exc:
                wait = _seconds(exc.retry_after) + 0.5
                log.warning("getUpdates: Telegram asks to wait %.1fs (429)", wait)
                await asyncio.sleep(wait)
                continue
            except TimedOut:
                continue  # the long poll outlived its read timeout: ask again at once
            except TelegramError as exc:
                backoff = FIRST_BACKOFF if backoff == 0 else min(MAX_BACKOFF, backoff * 1.5)
                if isinstance(exc, Conflict):
                    log.warning(
                        "getUpdates refused: %s (another process polls this TELEGRAM_TOKEN, or a webhook is "
                        "set); trying again in %.1fs",
                        exc.message,
                        backoff,
                    )
                else:
                    log.warning("getUpdates failed: %s; trying again in %.1fs", exc.message, backoff)
                await asyncio.sleep(backoff)
                continue
            except Exception:  # updates Telegram sent that PTB could not read: they stay unconfirmed
                backoff = FIRST_BACKOFF if backoff == 0 else min(MAX_BACKOFF, backoff * 1.5)
                log.exception("could not read the updates Telegram sent; fetching them again in %.1fs", backoff)
                await asyncio.sleep(backoff)
                continue
            backoff = 0.0
            new = [u for u in updates if self._is_new(u.update_id)]
            self._look = self.burst_look if new else min(self.busy_interval, self._look * 2)
            if new:
                await self._handle_batch(new)
            elif self._background and len(updates) >= FETCH_LIMIT:
                await self._changes(None)  # Telegram's window is full of updates in hand: wait for one

    def _is_new(self, update_id: int) -> bool:
        if self.offset is not None and update_id < self.offset:
            return False  # handled already (Telegram had not got the confirmation yet)
        return update_id not in self._background and update_id not in self._handled

    async def _changes(self, timeout: float | None) -> None:
        """Wait until an update handled in the background is done (or ``timeout`` seconds)."""
        self._finished.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._finished.wait()

    async def _fetch(self, timeout: int) -> Sequence[Update]:
        self.sent_offset = self.offset
        return await self.bot.get_updates(
            offset=self.offset, timeout=dtm.timedelta(seconds=timeout), allowed_updates=self.allowed_updates
        )

    async def _handle_batch(self, updates: Sequence[Update]) -> None:
        self._handling = True
        self._idle.clear()
        try:
            for update in updates:  # (new ones: the same update twice in one answer is handed over twice)
                update_id = update.update_id
                later = await self.handle(update)
                if later is None:
                    self._handled.add(update_id)
                else:
                    future = asyncio.ensure_future(later)
                    self._background[update_id] = future
                    future.add_done_callback(functools.partial(self._done, update_id))
                self._next = max(self._next or 0, update_id + 1)
                self._advance()
        finally:
            self._handling = False
            self._idle.set()

    def _done(self, update_id: int, future: asyncio.Future[None]) -> None:
        if self._background.get(update_id) is not future:
            return  # given up by ``stop``: it stays unconfirmed
        del self._background[update_id]
        if not future.cancelled() and future.exception() is not None:
            log.error("handling update %s failed", update_id, exc_info=future.exception())
        self._handled.add(update_id)
        self._advance()
        self._finished.set()

    def _advance(self) -> None:
        """The offset: the first update in hand not handled yet, or past the last one fetched."""
        offset = min(self._background) if self._background else self._next
        if offset is None:
            return
        self.offset = offset
        self._handled = {i for i in self._handled if i >= offset}

    async def _confirm(self) -> None:
        """Tell Telegram the updates below ``offset`` are handled, unless the last fetch already did."""
        if self.offset is None or self.offset == self.sent_offset:
            return
        try:
            async with asyncio.timeout(10):
                await self.bot.get_updates(
                    offset=self.offset, limit=1, timeout=dtm.timedelta(0), allowed_updates=self.allowed_updates
                )
            self.sent_offset = self.offset
        except (TelegramError, TimeoutError) as exc:
            log.info("could not confirm the last updates (%s): the next poller fetches them again and drops them", exc)


async def until_stored(work: Callable[[], Awaitable[None]], *, what: str, full: bool = True) -> None:
    """``await work()`` until it succeeds, trying again with backoff while the queue cannot take it: Redis
    cannot be reached (``DispatchError``, ``MemoryStoreError``) or the inbox is full (``BackpressureError``,
    a ``DispatchError``; raised instead with ``full=False``). The update stays unconfirmed meanwhile, and so
    does every later one: should this process die, the next poller fetches them again. Any other error is
    raised."""
    failing_since: float | None = None
    delay = STORE_FIRST_BACKOFF
    while True:
        try:
            await work()
        except BackpressureError:
            if not full:
                raise
            if failing_since is None:
                failing_since = time.monotonic()
                log.warning("%s is kept unconfirmed (with the updates after it) until it is stored: inbox full", what)
        except (DispatchError, MemoryStoreError) as exc:
            if failing_since is None:
                failing_since = time.monotonic()
                log.warning("%s is kept unconfirmed (with the updates after it) until it is stored: %s", what, exc)
            else:
                log.debug("%s still not stored: %s", what, exc)
        else:
            if failing_since is not None:
                log.warning("%s stored after %.1fs", what, time.monotonic() - failing_since)
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, STORE_MAX_BACKOFF)


def _seconds(value: float | dtm.timedelta) -> float:
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)
