"""Web visitor identities that expire: a visitor is noted in the ``VisitorBook`` when they use the page (once a
minute at most per visitor and process), and a visitor idle ``WEB_VISITOR_IDLE_DAYS`` is forgotten with everything
kept about their conversation: its reminders, memory, working memory, state log, history and summary, settings,
and in a fleet its queue keys. The page's cookie lasts as long, renewed at each visit, so the browser forgets the
identity when the bot does; a cookie kept past that only names a new, empty conversation.

A scheduled firing is not a visit: reminders set by a visitor who went away go with the rest. The sweep runs
where the page is served (``bots run``, every ``bots gateway`` with the web chat), each idle visitor taken once.

``newcomer`` counts new visitors per address in the book (fleet-wide in Redis); when the book cannot answer, this
process's own count decides, so the page keeps working with a cap.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.errors import BotError, ConfigError

from ..chat.reminders import schedules_or_none
from ..chat.trust import SlidingCap
from .definitions import web_chat

if TYPE_CHECKING:
    from core import Host

    from .visitor_book import VisitorBook

__all__ = ("DAY", "SEEN_EVERY", "SWEEP_BATCH", "SWEEP_EVERY", "IdleVisitors", "forget_visitor")

log = logging.getLogger("extensions.web")

DAY = 86400.0
"""Seconds in a day."""
SEEN_EVERY = 60.0
"""Seconds between two notes of the same visitor's visits by one process at most."""
SWEEP_EVERY = 3600.0
"""Seconds between two sweeps at most (a shorter idle time sweeps more often)."""
SWEEP_BATCH = 100
"""Idle visitors taken at once."""
NOTED = 10_000
"""Visitors whose last note this process remembers (to skip a note within ``SEEN_EVERY``)."""


async def forget_visitor(agent: Host, visitor: str, *, book: VisitorBook) -> None:
    """Erase everything kept about ``visitor``'s conversation: its schedules, what ``/forget`` erases (memory,
    working memory, state log, history, summary), its settings, and in a fleet its queue keys."""
    cid = agent.context_id(web_chat, visitor)
    schedules = schedules_or_none(agent)
    if schedules is not None:
        for schedule in await schedules.by_conversation(cid):
            await schedules.cancel(schedule.id)
    await agent.forget(web_chat, visitor)
    await agent.chat_settings.erase(cid)
    await book.drop_conversation(cid)


class IdleVisitors:
    """The visits and new visitors of one web chat, and the sweep of the idle ones."""

    def __init__(
        self,
        book: VisitorBook,
        *,
        idle_days: float,
        new_per_hour: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.book = book
        """Where visits and new visitors are kept (Redis in a fleet)."""
        self.idle_days = idle_days
        """Days a visitor lasts without a visit (``WEB_VISITOR_IDLE_DAYS``; 0: forever)."""
        self.new_per_hour = new_per_hour
        """New visitors per address and hour at most (``WEB_NEW_VISITORS_PER_HOUR``; 0: no limit)."""
        self.clock = clock
        """Seconds since the epoch (a test moves it)."""
        self._noted: OrderedDict[str, float] = OrderedDict()
        self._here = SlidingCap(new_per_hour, 3600.0, clock=clock) if new_per_hour else None
        self._agent: Host | None = None
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def idle_seconds(self) -> float | None:
        """Seconds a visitor lasts without a visit (None: forever)."""
        return self.idle_days * DAY if self.idle_days > 0 else None

    async def visited(self, visitor: str) -> None:
        """``visitor`` used the page now (noted at most every ``SEEN_EVERY`` seconds; a failure is only logged)."""
        now = self.clock()
        last = self._noted.get(visitor)
        if last is not None and now - last < SEEN_EVERY:
            return
        self._noted[visitor] = now
        self._noted.move_to_end(visitor)
        while len(self._noted) > NOTED:
            self._noted.popitem(last=False)
        try:
            await self.book.seen(visitor, at=now)
        except BotError as exc:
            self._noted.pop(visitor, None)  # (noted at the next visit)
            log.warning("a web visit could not be noted (%s); the visitor's idle time runs from their last one", exc)

    async def newcomer(self, address: str) -> bool:
        """A new visitor from ``address`` may start (and is counted); False past ``WEB_NEW_VISITORS_PER_HOUR``."""
        if self._here is None:
            return True
        here = self._here.take(address)  # (this process's own count: what decides when the book cannot answer)
        try:
            return await self.book.newcomer(address, most=self.new_per_hour, window=3600.0, at=self.clock())
        except BotError as exc:
            log.warning("new web visitors cannot be counted for the fleet now (%s); counted in this process", exc)
            return here

    async def sweep(self) -> list[str]:
        """Forget the visitors idle longer than ``WEB_VISITOR_IDLE_DAYS``; the ones forgotten. One that cannot be
        forgotten now goes back in the book, to be tried at the next sweep."""
        idle, agent = self.idle_seconds, self._agent
        if idle is None:
            return []
        if agent is None:
            raise ConfigError("the web chat's visitors are swept once it started (IdleVisitors.start)")
        before = self.clock() - idle
        forgotten: list[str] = []
        while True:
            found = await self.book.idle(before=before, limit=SWEEP_BATCH)
            for visitor in found:
                try:
                    await forget_visitor(agent, visitor, book=self.book)
                except BotError as exc:
                    log.warning("web visitor %s could not be forgotten now (%s); tried again later", visitor, exc)
                    await self.book.seen(visitor, at=before - 1.0)
                    return forgotten
                self._noted.pop(visitor, None)
                forgotten.append(visitor)
            if len(found) < SWEEP_BATCH:
                break
        if forgotten:
            days = idle / DAY
            log.info("forgot %d web visitor(s) idle %g days or more (WEB_VISITOR_IDLE_DAYS)", len(forgotten), days)
        return forgotten

    # -- the sweeper, while the page is served ---------------------------------------------------------

    def start(self, agent: Host, *, sweep: bool = True) -> None:
        """Forget ``agent``'s idle visitors from now on: with ``sweep``, every ``SWEEP_EVERY`` seconds (or a tenth
        of the idle time, when shorter) until ``stop``."""
        self._agent = agent
        idle = self.idle_seconds
        if sweep and idle is not None and self._sweeper is None:
            every = max(1.0, min(SWEEP_EVERY, idle / 10))
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_every(every), name="web-visitors")

    async def _sweep_every(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                await self.sweep()
            except BotError as exc:
                log.warning("idle web visitors could not be swept (%s); next try in %gs", exc, every)

    async def stop(self) -> None:
        """Stop sweeping; close the book."""
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
        await self.book.close()
