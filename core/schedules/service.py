"""An agent's schedules: the API bot authors and commands use (set, list, cancel), and the service that fires
them on time.

Firing one occurrence: the schedule is claimed from the store (hidden from other claimers for ``lease``
seconds), its conversation is sent an input of type ``schedule`` with the dedupe key
``schedule:<id>:<occurrence ms>`` (so the occurrence is stored once, however many times it is sent: a fleet's
ingest drops the redelivery), then the store advances it to its next occurrence with a compare-and-set (once,
whoever gets there first). A claimer that dies between the two leaves the claim to expire: the next one sends
again (dropped as a redelivery if the first send got through) and advances. An occurrence found more than
``grace`` seconds late (the bot was down) is not fired: it is logged and counted (``schedule_missed``), and a
recurring schedule moves to its next occurrence after now, computed once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..definitions import Context, service
from ..entries import InputRef
from ..errors import ConfigError
from ..task_runner import finish_or_cancel
from ..trust.tiers import TIER_PARAM
from .clock import Clock, SyncedClock, SystemClock
from .model import SCHEDULE_INPUT, Schedule, ScheduleKind, check_zone, to_utc
from .store import MemoryScheduleStore, ScheduleStore

if TYPE_CHECKING:
    from ..definition_types import Host, Setup

__all__ = ("Schedules", "schedule_input", "schedules_of")

log = logging.getLogger("core.schedules")


def schedules_of(agent: Host) -> Schedules:
    """The schedules of ``agent`` (``Schedules.attach``, ``agent.provided(Schedules)``); ``ConfigError`` when none
    were attached."""
    found = agent.provided(Schedules)
    if found is None:
        raise ConfigError(
            "this agent has no schedules: call core.schedules.Schedules.attach(agent) after create_agent "
            "(bots' build_agent does it)"
        )
    return found


def schedule_input(schedule: Schedule, occurrence: datetime) -> InputRef:
    """The input a firing of ``schedule`` at ``occurrence`` delivers to its conversation: its data says what to
    do (``kind``, ``text``), its params who set it (``user_id`` and ``platform``, so limits and usage count it to
    them, and their ``tier``) and which schedule it is."""
    platform, _, user = (schedule.creator or "").partition(":")
    params: dict[str, str] = {"user": "scheduler", "schedule_id": schedule.id}
    if user:
        params.update(user_id=user, platform=platform)
    if schedule.tier:
        params[TIER_PARAM] = schedule.tier
    local = occurrence.astimezone(check_zone(schedule.tz))
    when = f"{local:%Y-%m-%d %H:%M} {schedule.tz}"
    setter = f"by {schedule.creator}" if schedule.creator else "by the operator"
    again = "a recurring schedule" if schedule.recurring else "a one-time schedule"
    if schedule.kind is ScheduleKind.TEXT:
        text = f"Scheduled message ({again} set {setter}, due {when}), posted as written: {schedule.text}"
    else:
        text = (
            f"It is time for {again} set {setter} in this conversation (due {when}). Write the message it asks "
            f"for now, to the chat, in the chat's language: {schedule.text}"
        )
    return InputRef(
        type=SCHEDULE_INPUT,
        data={
            "schedule_id": schedule.id,
            "kind": schedule.kind.value,
            "text": schedule.text,
            "occurrence": occurrence.isoformat(),
            "recurring": schedule.recurring,
            "creator": schedule.creator,
        },
        params=params,
        text=text,
    )


class Schedules:
    """The schedules of one agent: ``set``/``get``/``by_conversation``/``by_creator``/``cancel``, and, while the
    agent runs (with ``fire``), the firing of the due ones. Build it with ``Schedules.attach(agent, ...)`` and
    reach it with ``schedules_of(agent)``."""

    def __init__(
        self,
        store: ScheduleStore,
        *,
        clock: Clock | None = None,
        grace: float = 3600.0,
        fire: bool = True,
        poll: float = 1.0,
        lease: float = 30.0,
        batch: int = 100,
        concurrency: int = 32,
    ) -> None:
        self.store = store
        """Where the schedules live."""
        self.clock: Clock = clock if clock is not None else SystemClock()
        """What time it is (a fleet's workers: the Redis primary's, ``core.fleet.ServerClock``; a ``ManualClock``
        in tests)."""
        self._sync = self.clock.sync if isinstance(self.clock, SyncedClock) else None
        self.grace = grace
        """Seconds late an occurrence may still fire (``BOT_SCHEDULES_GRACE``); older ones are reported."""
        self.fire = fire
        """Whether this process fires due schedules (a fleet's gateways only set, list and cancel them)."""
        self.poll = poll
        """Seconds between two looks at the store at most (schedules set by other processes are seen then)."""
        self.lease = lease
        """Seconds a claimed occurrence is hidden from other claimers (a claimer that dies hands it over then)."""
        self.batch = batch
        """Occurrences claimed at once at most."""
        self.concurrency = concurrency
        """Occurrences this process sends at once at most, and so claims (in one process, each may be a whole
        run)."""
        self._agent: Setup | None = None
        self._changed = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._firing: dict[str, asyncio.Task[None]] = {}

    @classmethod
    def attach(cls, agent: Setup, store: ScheduleStore | None = None, **options: Any) -> Schedules:
        """Give ``agent`` schedules kept in ``store`` (default: in its memory store, one process only), fired by
        a service started and stopped with the agent (at once when it is already running). ``options``:
        ``clock``, ``grace``, ``fire``, ``poll``, ``lease``, ``batch``, ``concurrency``. A scheduled text
        (``ScheduleKind.TEXT``) is posted as written by the agent's ``core.schedules.plugin.ScheduledTexts``
        plugin: without it, the model answers it like any other input."""
        if store is None:
            if agent.distributed:
                raise ConfigError(
                    "schedules of an agent on a shared queue must live in Redis: pass "
                    "store=core.fleet.RedisScheduleStore(backend) to Schedules.attach"
                )
            store = MemoryScheduleStore(agent.memory)
        found = cls(store, **options)
        found._agent = agent
        agent.provide(Schedules, found)
        agent.add_service(service(name="schedules", start=found._start, stop=found._stop))
        if agent.running and found.fire:  # attached to an agent already started: its services started before
            found._loop = asyncio.get_running_loop().create_task(found._run(), name="schedules")
        return found

    @property
    def agent(self) -> Setup:
        """The agent the schedules belong to."""
        if self._agent is None:
            raise ConfigError("these schedules are attached to no agent: use Schedules.attach(agent, store)")
        return self._agent

    # -- the API ---------------------------------------------------------------------------------------

    def address(self, context: Context, args: Any) -> dict[str, Any]:
        """The fields that tie a schedule to the conversation of ``context`` and ``args`` (``conversation``,
        ``context``, ``args``), for ``Schedule.once`` and friends."""
        args = context.schema.validate(args)
        return {
            "conversation": self.agent.context_id(context, args),
            "context": context.type,
            "args": context.schema.dump(args),
        }

    async def set(
        self, schedule: Schedule, *, per_conversation: int | None = None, per_creator: int | None = None
    ) -> Schedule:
        """Store ``schedule`` (``ScheduleLimitError`` past the limits given); the firing loop sees it at once."""
        await self.store.add(schedule, per_conversation=per_conversation, per_creator=per_creator)
        self._changed.set()
        return schedule

    async def once(
        self,
        context: Context,
        args: Any,
        *,
        at: datetime,
        text: str,
        kind: ScheduleKind = ScheduleKind.PROMPT,
        creator: str | None = None,
        tz: str = "UTC",
        **limits: int | None,
    ) -> Schedule:
        """Set a schedule firing once at ``at`` in the conversation of ``context`` and ``args``."""
        found = Schedule.once(
            at=at,
            text=text,
            kind=kind,
            creator=creator,
            tz=tz,
            created_at=self.clock.now(),
            **self.address(context, args),
        )
        return await self.set(found, **limits)

    async def cron(
        self,
        context: Context,
        args: Any,
        expr: str,
        *,
        text: str,
        tz: str = "UTC",
        kind: ScheduleKind = ScheduleKind.PROMPT,
        creator: str | None = None,
        **limits: int | None,
    ) -> Schedule:
        """Set a schedule firing on the cron expression ``expr`` read in ``tz``."""
        found = Schedule.cron_of(
            expr, text=text, now=self.clock.now(), tz=tz, kind=kind, creator=creator, **self.address(context, args)
        )
        return await self.set(found, **limits)

    async def every(
        self,
        context: Context,
        args: Any,
        seconds: float,
        *,
        text: str,
        start: datetime | None = None,
        kind: ScheduleKind = ScheduleKind.PROMPT,
        creator: str | None = None,
        tz: str = "UTC",
        **limits: int | None,
    ) -> Schedule:
        """Set a schedule firing every ``seconds``, first at ``start`` (default: one interval from now)."""
        found = Schedule.interval(
            seconds,
            text=text,
            now=self.clock.now(),
            start=start,
            kind=kind,
            creator=creator,
            tz=tz,
            **self.address(context, args),
        )
        return await self.set(found, **limits)

    async def get(self, schedule_id: str) -> Schedule | None:
        """The active schedule ``schedule_id``, or None."""
        return await self.store.get(schedule_id)

    async def by_conversation(self, conversation: str) -> list[Schedule]:
        """The active schedules of a conversation (context id), soonest first."""
        return await self.store.by_conversation(conversation)

    async def by_creator(self, creator: str) -> list[Schedule]:
        """The active schedules a user set, soonest first."""
        return await self.store.by_creator(creator)

    async def cancel(self, schedule_id: str) -> Schedule | None:
        """Cancel ``schedule_id``; the cancelled schedule, or None when there was none."""
        return await self.store.cancel(schedule_id)

    async def pending(self) -> int:
        """Active schedules in all."""
        return await self.store.pending()

    async def upcoming(self, limit: int = 10) -> list[Schedule]:
        """The ``limit`` active schedules due soonest, of every conversation."""
        return await self.store.upcoming(limit)

    # -- firing ----------------------------------------------------------------------------------------

    async def fire_due(self) -> int:
        """Claim the occurrences due now, as many as this process has room to send (``concurrency`` at once, so
        the workers of a fleet share a burst), and fire each in its own task; the number claimed. The service's
        loop calls it; a test may too."""
        room = min(self.batch, self.concurrency - len(self._firing))
        if room <= 0 or self._busy():
            return 0
        now = self.clock.now()
        claimed = await self.store.claim(now, limit=room, lease=self.lease)
        for found in claimed:
            if found.id in self._firing:
                continue  # still being sent by this process (a long run): its claim is renewed by this one
            task = asyncio.create_task(self._guarded(found, now), name=f"schedule:{found.id}")
            self._firing[found.id] = task
            task.add_done_callback(functools.partial(self._fired, found.id))
        return len(claimed)

    def _busy(self) -> bool:
        """Too few free places to claim again: a burst is claimed in quarters of ``concurrency``, not one by one."""
        return self.concurrency - len(self._firing) < max(1, self.concurrency // 4)

    def _fired(self, schedule_id: str, _task: asyncio.Task[None]) -> None:
        self._firing.pop(schedule_id, None)
        self._changed.set()  # room for another claim

    async def _guarded(self, found: Schedule, now: datetime) -> None:
        """``fire_one``, tried again every ``poll`` seconds while this process's claim lasts (half the lease: a
        conversation's inbox full, Redis restarting, the agent still starting); after that the claim expires
        and the next claimer tries (sending again is safe: the per-occurrence dedupe key drops a repeat). A try
        again is late by the time it is made (``now``: the claim's, for the first)."""
        give_up = self.clock.now() + timedelta(seconds=self.lease / 2)
        claimed = now
        while True:
            try:
                await self.fire_one(found, now, claimed=claimed)
                return
            except Exception as exc:
                self.agent.observe("schedule_failed", found.conversation, 1.0)
                again = not isinstance(exc, ConfigError) and self.clock.now() + timedelta(seconds=self.poll) < give_up
                log.warning(
                    "schedule %s of %s did not fire (%s): %s",
                    found.id,
                    found.conversation,
                    f"trying again in {self.poll:g}s" if again else f"another claim in {self.lease / 2:g}s",
                    exc,
                )
                if not again:
                    return
            await self.clock.sleep(self.poll)
            now = self.clock.now()

    async def fire_one(self, found: Schedule, now: datetime, *, claimed: datetime | None = None) -> bool:
        """Fire the occurrence ``found`` was claimed with (``found.next_fire_at``) at ``claimed`` (default: ``now``,
        a try again's time), or report it missed when the claim came more than ``grace`` seconds late (a try again
        after a failure, perhaps after it was sent, is not judged by its own time); then advance it. True when this
        call advanced it."""
        agent = self.agent
        occurrence = found.next_fire_at
        if occurrence is None:
            return False
        late = max(0.0, (to_utc(now) - occurrence).total_seconds())
        following = found.following(max(occurrence, to_utc(now)))
        if (to_utc(claimed or now) - occurrence).total_seconds() > self.grace:
            moved = await self.store.advance(found, next_fire_at=following, missed=True)
            if moved:
                agent.observe("schedule_missed", found.conversation, 1.0)
                log.warning(
                    "schedule %s of %s was due %s, %.0fs ago (more than BOT_SCHEDULES_GRACE=%gs): not fired%s",
                    found.id,
                    found.conversation,
                    occurrence.isoformat(),
                    late,
                    self.grace,
                    f"; next {following.isoformat()}" if following else "",
                )
            return moved
        context = agent.contexts.get(found.context)
        if context is None:
            raise ConfigError(
                f"schedule {found.id} is for a {found.context!r} conversation and this process has no such context "
                "(its platform is not enabled here)"
            )
        ms = int(occurrence.timestamp() * 1000)
        await agent.send(context, found.args, schedule_input(found, occurrence), dedupe_key=f"schedule:{found.id}:{ms}")
        moved = await self.store.advance(found, next_fire_at=following)
        if moved:
            agent.observe("schedule_fired", found.conversation, 1.0)
            agent.observe("schedule_late_seconds", found.conversation, late)
            log.info("schedule %s fired in %s (%.3fs late)", found.id, found.conversation, late)
        return moved

    async def _run(self) -> None:
        agent = self.agent
        while True:
            self._changed.clear()  # a schedule set, or a firing ended, from here on wakes the pause below
            try:
                if self._sync is not None:
                    await self._sync()
                if agent.running and await self.fire_due() > 0 and not self._busy():
                    continue  # there may be more due, and room to send them: no sleep
                if self._busy():
                    await self._pause(self.poll)  # until firings end (each wakes it)
                    continue
                wait = self.poll
                soonest = await self.store.next_due()
                if soonest is not None:
                    wait = min(wait, (soonest - self.clock.now()).total_seconds())
            except Exception as exc:  # the store is down (Redis restarting): look again later
                log.warning("schedules: %s; trying again in %gs", exc, self.poll)
                wait = self.poll
            if wait > 0:
                await self._pause(wait)

    async def _pause(self, seconds: float) -> None:
        if self._changed.is_set():
            return
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        woken = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({sleeper, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, woken):
                task.cancel()
            await asyncio.gather(sleeper, woken, return_exceptions=True)

    async def _start(self, _agent: Setup) -> None:
        if self.fire and self._loop is None:
            self._loop = asyncio.get_running_loop().create_task(self._run(), name="schedules")

    async def _stop(self, _agent: Setup) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
        await finish_or_cancel(list(self._firing.values()), self.agent.stop_timeout)
        await self.store.close()

    def describe(self) -> Mapping[str, Any]:
        """What the firing loop is doing (for logs and status pages)."""
        return {"fire": self.fire, "firing": len(self._firing), "grace": self.grace}
