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
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError, TimedOut

from core.errors import DispatchError, MemoryStoreError

__all__ = ("Poller", "until_stored")

log = logging.getLogger("extensions.telegram")

BOOTSTRAP_ATTEMPTS = 4
"""Tries of ``deleteWebhook`` before polling starts (what PTB's ``bootstrap_retries=3`` gives)."""
FIRST_BACKOFF = 1.0
"""Seconds before fetching again after a failed ``getUpdates``; grows 1.5 times per failure in a row..."""
MAX_BACKOFF = 30.0
"""... up to this."""
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
    """``getUpdates`` in a loop; the offset moves past an update only once ``handle`` returned for it."""

    def __init__(
        self,
        bot: Bot,
        handle: Callable[[Update], Awaitable[None]],
        *,
        timeout: int,
        allowed_updates: Sequence[str],
        on_invalid_token: Callable[[InvalidToken], None],
    ) -> None:
        self.bot = bot
        """The bot that fetches."""
        self.handle = handle
        """Called for each update, in order; returns once the update is handled."""
        self.timeout = timeout
        """Seconds one long poll may wait (``TELEGRAM_POLL_TIMEOUT``)."""
        self.allowed_updates = tuple(allowed_updates)
        """The update types asked for."""
        self.on_invalid_token = on_invalid_token
        """Told when Telegram refuses the token while polling (polling has ended)."""
        self.offset: int | None = None
        """The first update id not handled yet (None: start from what Telegram holds)."""
        self.sent_offset: int | None = None
        """The offset of the last ``getUpdates`` sent: Telegram forgot every update below it."""
        self._task: asyncio.Task[None] | None = None
        self._handling = False
        self._stopping = False
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def running(self) -> bool:
        """The loop runs (it may be waiting out an error)."""
        return self._task is not None and not self._task.done()

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
        """Fetch no more; give the batch in hand ``timeout`` seconds to be handled (then cancel it: its
        rest stays with Telegram); confirm what was handled."""
        task, self._stopping = self._task, True
        if task is None:
            return
        if self._handling:
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                log.warning("stopping: updates still being handled after %.1fs are left to the next poller", timeout)
        task.cancel()  # a long poll (or a wait after an error): nothing to lose
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if not task.cancelled() and task.exception() is not None:
            log.error("polling failed", exc_info=task.exception())
        self._idle.set()
        await self._confirm()

    async def wait_idle(self) -> None:
        """Return once no fetched update is waiting to be handled."""
        await self._idle.wait()

    # -- the loop --------------------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = 0.0
        while not self._stopping:
            try:
                updates = await self._fetch()
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
            if updates:
                await self._handle_batch(updates)

    async def _fetch(self) -> Sequence[Update]:
        self.sent_offset = self.offset
        return await self.bot.get_updates(
            offset=self.offset, timeout=dtm.timedelta(seconds=self.timeout), allowed_updates=self.allowed_updates
        )

    async def _handle_batch(self, updates: Sequence[Update]) -> None:
        self._handling = True
        self._idle.clear()
        try:
            for update in updates:
                if self.offset is not None and update.update_id < self.offset:
                    continue  # handled already (Telegram had not got the confirmation yet)
                await self.handle(update)
                self.offset = update.update_id + 1
        finally:
            self._handling = False
            self._idle.set()

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


async def until_stored(work: Callable[[], Awaitable[None]], *, what: str) -> None:
    """``await work()`` until it succeeds, trying again with backoff while the queue cannot take it: Redis
    cannot be reached (``DispatchError``, ``MemoryStoreError``) or the inbox is full (``BackpressureError``,
    a ``DispatchError``). The update stays unconfirmed meanwhile, and so does every later one: should this
    process die, the next poller fetches them again. Any other error is raised."""
    failing_since: float | None = None
    delay = STORE_FIRST_BACKOFF
    while True:
        try:
            await work()
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
