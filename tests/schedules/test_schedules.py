"""Schedules in one process (``bots run``): on time, once, each occurrence of a recurring one, a text posted as
written, across a restart within the grace period (fired once) and beyond it (reported, not fired)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core import InMemoryStore, ModelRequest, ScriptedModel, SQLiteStore, context, create_agent, errors, output, service
from core.errors import ConfigError, ValidationError
from core.schedules import (
    SCHEDULE_INPUT,
    ManualClock,
    Schedule,
    ScheduleKind,
    ScheduleLimitError,
    Schedules,
    check_zone,
    next_after,
    schedule_input,
    schedules_of,
)
from core.schedules.plugin import ScheduledTexts
from core.usage import user_of

chat = context(type="chat", schema=str, key=lambda s: s)


def answer(request: ModelRequest) -> str:
    return '<response><output type="chat:message">reminder written by the model</output></response>'


def make(memory: Any = None, *, sent: list[tuple[str, str]] | None = None, clock: Any = None, **options: Any) -> Any:
    posted = sent if sent is not None else []
    say = output(type="chat:message", handler=lambda data, ctx, ag: posted.append((ctx.state.key, data)))
    model = ScriptedModel(answer)
    agent = create_agent(
        model=model, contexts=[chat], outputs=[say], memory=memory or InMemoryStore(), plugins=[ScheduledTexts()]
    )
    seen: list[tuple[str, str, float]] = []
    agent.add_observer(lambda kind, cid, value: seen.append((kind, cid, value)))
    schedules = Schedules.attach(agent, clock=clock, **options)
    return agent, schedules, model, seen


async def settle(predicate: Any = None, *, rounds: int = 500, timeout: float = 15.0) -> None:
    """Let the firing tasks run (the clock is manual: nothing waits on real time): until ``predicate()`` holds (the
    test fails after ``timeout`` seconds, a hang), or without one for ``rounds`` short rounds (nothing else happens)."""
    if predicate is None:
        for _ in range(rounds):
            await asyncio.sleep(0.002)
        return
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout:g}s: {predicate}")
        await asyncio.sleep(0.002)


# -- the model -----------------------------------------------------------------------------------------------


def test_cron_is_read_in_the_time_zone_across_a_dst_change() -> None:
    # 9:00 in Paris: 8:00 UTC in winter, 7:00 UTC in summer (the clocks went forward on 2026-03-29)
    first = next_after(
        cron="0 9 * * *", every=None, at=None, tz="Europe/Paris", after=datetime(2026, 3, 28, 12, tzinfo=UTC)
    )
    assert first == datetime(2026, 3, 29, 7, tzinfo=UTC)
    before = next_after(
        cron="0 9 * * *", every=None, at=None, tz="Europe/Paris", after=datetime(2026, 3, 27, 12, tzinfo=UTC)
    )
    assert before == datetime(2026, 3, 28, 8, tzinfo=UTC)


def test_a_time_a_dst_change_repeats_fires_once_and_one_it_skips_fires_after_it() -> None:
    def chain(after: datetime) -> list[datetime]:
        out = []
        for _ in range(2):
            found = next_after(cron="30 2 * * *", every=None, at=None, tz="Europe/Paris", after=after)
            assert found is not None
            out.append(found)
            after = found
        return out

    # 2:30 happens twice on 2026-10-25 (3:00 CEST -> 2:00 CET): once, at the first
    assert chain(datetime(2026, 10, 24, 12, tzinfo=UTC)) == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
    ]
    # 2:30 does not happen on 2026-03-29 (2:00 CET -> 3:00 CEST): at 3:00, the first instant after it
    assert chain(datetime(2026, 3, 28, 12, tzinfo=UTC)) == [
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
    ]


def test_an_interval_skips_what_was_missed_in_one_computation() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    s = Schedule.interval(60, text="tick", now=start, conversation="chat:a", context="chat", args="a")
    assert s.next_fire_at == start + timedelta(seconds=60)
    assert s.following(start + timedelta(days=3, seconds=30)) == start + timedelta(days=3, seconds=60)


def test_bad_schedules_are_refused_with_a_hint() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    where = {"conversation": "chat:a", "context": "chat", "args": "a"}
    with pytest.raises(ValidationError, match="cron expression"):
        Schedule.cron_of("every monday", text="x", now=now, **where)
    with pytest.raises(ValidationError, match="IANA"):
        Schedule.cron_of("0 9 * * 1", text="x", now=now, tz="Mars/Olympus", **where)
    with pytest.raises(ValidationError, match="at least"):
        Schedule.interval(0.1, text="x", now=now, **where)
    with pytest.raises(ValidationError, match="text"):
        Schedule.once(at=now, text="  ", **where)
    with pytest.raises(ValidationError, match="schedule id"):
        Schedule.once(at=now, text="x", id="conv:telegram:1", **where)
    with pytest.raises(ValidationError, match="IANA") as zone:  # too long for a file name: zoneinfo's OSError
        check_zone("x" * 300)
    assert len(str(zone.value)) < 200  # what came from a chat is quoted shortened
    with pytest.raises(ValidationError, match="cron expression") as cron:
        Schedule.cron_of("9 " * 500, text="x", now=now, **where)
    assert len(str(cron.value)) < 400
    with pytest.raises(ValidationError, match="IANA"):
        Schedule.once(at=now, text="x", tz="Europe/" + "x" * 300, **where)


def test_the_limit_error_is_one_of_the_project_s_errors() -> None:
    assert ScheduleLimitError is errors.ScheduleLimitError and issubclass(ScheduleLimitError, ValidationError)


def test_a_firing_counts_to_the_user_who_set_it() -> None:
    s = Schedule.once(
        at=datetime(2026, 1, 1, tzinfo=UTC),
        text="call the bank",
        creator="telegram:42",
        conversation="telegram:1",
        context="telegram",
        args={"chat_id": 1},
    )
    ref = schedule_input(s, s.next_fire_at or datetime.now(UTC))
    assert ref.type == SCHEDULE_INPUT
    assert user_of(ref) == "telegram:42"
    assert ref.data["kind"] == "prompt" and ref.data["text"] == "call the bank"


# -- firing --------------------------------------------------------------------------------------------------


async def test_a_reminder_fires_once_at_its_time() -> None:
    clock = ManualClock()
    sent: list[tuple[str, str]] = []
    agent, schedules, model, seen = make(sent=sent, clock=clock)
    async with agent:
        found = await schedules.once(
            chat, "a", at=clock.now() + timedelta(seconds=2), text="remind me", creator="chat:7"
        )
        assert [s.id for s in await schedules.by_conversation("chat:a")] == [found.id]
        assert [s.id for s in await schedules.by_creator("chat:7")] == [found.id]
        await clock.advance(1.5)
        await settle(rounds=50)
        assert sent == []
        await clock.advance(0.5)
        await settle(lambda: sent)
        await clock.advance(3600)
        await settle(rounds=50)
    assert sent == [("a", "reminder written by the model")]
    prompt = model.requests[0].prompt
    assert 'type="schedule"' in prompt and "remind me" in prompt
    assert await schedules.by_conversation("chat:a") == []
    fired = [value for kind, cid, value in seen if kind == "schedule_fired" and cid == "chat:a"]
    assert fired == [1.0]


async def test_a_recurring_schedule_fires_at_each_occurrence_and_a_text_is_posted_as_written() -> None:
    clock = ManualClock()
    sent: list[tuple[str, str]] = []
    agent, schedules, model, seen = make(sent=sent, clock=clock)
    async with agent:
        await schedules.every(chat, "b", 60, text="stand-up time", kind=ScheduleKind.TEXT)
        await schedules.cron(chat, "c", "*/5 * * * *", text="check the queue")
        for minute in range(1, 11):
            await clock.set(datetime(2026, 1, 5, 8, minute, tzinfo=UTC))
            # c's run at 8:05 has ended (saved, not only posted) before 8:10 comes: one still running would take
            # the next firing into its run (under load, its saving outlasted the four minutes between)
            await settle(
                lambda m=minute: (
                    sum(1 for k, _ in sent if k == "b") >= m
                    and sum(1 for kind, cid, _ in seen if kind == "run_seconds" and cid == "chat:c") >= m // 5
                )
            )
    assert [text for key, text in sent if key == "b"] == ["stand-up time"] * 10
    assert [text for key, text in sent if key == "c"] == ["reminder written by the model"] * 2  # 8:05 and 8:10
    assert len(model.requests) == 2  # the texts were posted without the model
    (b,) = await schedules.by_conversation("chat:b")
    assert b.fired == 10 and b.next_fire_at == datetime(2026, 1, 5, 8, 11, tzinfo=UTC)


async def test_cancelled_schedules_do_not_fire_and_limits_hold() -> None:
    clock = ManualClock()
    sent: list[tuple[str, str]] = []
    agent, schedules, _, _ = make(sent=sent, clock=clock)
    async with agent:
        at = clock.now() + timedelta(seconds=10)
        first = await schedules.once(chat, "d", at=at, text="one", creator="chat:1", per_conversation=2, per_creator=1)
        with pytest.raises(ScheduleLimitError, match="at most 1"):
            await schedules.once(chat, "d", at=at, text="two", creator="chat:1", per_creator=1)
        await schedules.once(chat, "d", at=at, text="two", creator="chat:2", per_conversation=2)
        with pytest.raises(ScheduleLimitError, match="at most 2"):
            await schedules.once(chat, "d", at=at, text="three", creator="chat:3", per_conversation=2)
        later = await schedules.once(chat, "z", at=at + timedelta(hours=1), text="later")
        soonest = [x.text for x in await schedules.upcoming(3)]
        assert sorted(soonest[:2]) == ["one", "two"] and soonest[2] == "later"  # one and two are due together
        await schedules.cancel(later.id)
        cancelled = await schedules.cancel(first.id)
        assert cancelled is not None and cancelled.text == "one"
        assert await schedules.cancel(first.id) is None
        await clock.advance(10)
        await settle(lambda: sent)
    assert sent == [("d", "reminder written by the model")]
    assert schedules_of(agent) is schedules


async def test_a_bot_stopped_before_the_time_fires_it_once_after_a_restart_within_the_grace(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    start = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    agent, schedules, _, _ = make(SQLiteStore(path), clock=ManualClock(start), grace=600)
    async with agent:
        await schedules.once(chat, "e", at=start + timedelta(minutes=5), text="within the grace")
        await schedules.once(chat, "f", at=start + timedelta(minutes=2), text="too old by then")
        await schedules.every(chat, "g", 3600, text="hourly", start=start + timedelta(minutes=7))
    # down from 8:00 to 8:14, grace 10 min: "e" is 9 min late (fired), "f" 12 min (reported, dropped), "g" 7 min
    sent: list[tuple[str, str]] = []
    clock = ManualClock(start + timedelta(minutes=14))
    agent, schedules, _, seen = make(SQLiteStore(path), sent=sent, clock=clock, grace=600)
    async with agent:
        await settle(lambda: len(sent) >= 2)
        await settle(rounds=50)
        assert await schedules.by_conversation("chat:f") == []
    assert sorted(key for key, _ in sent) == ["e", "g"]
    assert [cid for kind, cid, _ in seen if kind == "schedule_missed"] == ["chat:f"]
    # a third start, much later: the hourly one is 2h53 late; it is reported once and moved past now, not fired
    sent.clear()
    clock = ManualClock(start + timedelta(hours=4))
    agent, schedules, _, seen = make(SQLiteStore(path), sent=sent, clock=clock, grace=600)
    async with agent:
        await settle(lambda: any(kind == "schedule_missed" for kind, _, _ in seen))
        await settle(rounds=50)
        (g,) = await schedules.by_conversation("chat:g")
    assert sent == []
    assert [cid for kind, cid, _ in seen if kind == "schedule_missed"] == ["chat:g"]
    assert g.missed == 1 and g.fired == 1 and g.next_fire_at == start + timedelta(hours=4, minutes=7)


async def test_a_reminder_two_seconds_ahead_fires_once_on_the_system_clock(tmp_path: Path) -> None:
    sent: list[tuple[str, str]] = []
    agent, schedules, _, _ = make(SQLiteStore(tmp_path / "m.sqlite3"), sent=sent, poll=0.2)
    async with agent:
        await schedules.once(chat, "h", at=datetime.now(UTC) + timedelta(seconds=2), text="soon")
        for _ in range(200):
            if sent:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    assert sent == [("h", "reminder written by the model")]


async def test_an_occurrence_due_at_start_fires_even_if_other_services_start_slowly() -> None:
    sent: list[tuple[str, str]] = []
    memory = InMemoryStore()
    agent, schedules, _, _ = make(memory, sent=sent, poll=0.1)
    await schedules.set(
        Schedule.once(at=datetime.now(UTC) - timedelta(seconds=5), text="overdue", **schedules.address(chat, "i"))
    )
    agent.add_service(service(name="slow", start=lambda _agent: asyncio.sleep(0.3)))  # starts after the firing loop
    async with agent:
        for _ in range(100):
            if sent:
                break
            await asyncio.sleep(0.05)
    assert sent == [("i", "reminder written by the model")]


async def test_schedules_attached_to_a_running_agent_fire() -> None:
    sent: list[tuple[str, str]] = []
    say = output(type="chat:message", handler=lambda data, ctx, ag: sent.append((ctx.state.key, data)))
    agent = create_agent(model=ScriptedModel(answer), contexts=[chat], outputs=[say])
    clock = ManualClock()
    async with agent:
        schedules = Schedules.attach(agent, clock=clock)
        await schedules.once(chat, "j", at=clock.now() + timedelta(seconds=1), text="late attach")
        await clock.advance(1)
        await settle(lambda: sent)
    assert sent == [("j", "reminder written by the model")]


def fail_first_send(agent: Any) -> Callable[[], int]:
    """Make the first ``agent.send`` fail, as a store or queue that failed once; how many were tried, then."""
    send, attempts = agent.send, [0]

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        attempts[0] += 1
        if attempts[0] == 1:
            raise errors.PlatformError("the inbox is full")
        return await send(*args, **kwargs)

    agent.send = flaky
    return lambda: attempts[0]


async def test_a_failed_attempt_is_counted_and_tried_again_while_the_claim_lasts() -> None:
    clock = ManualClock()
    sent: list[tuple[str, str]] = []
    agent, schedules, _, seen = make(sent=sent, clock=clock, poll=1.0, lease=30.0)
    attempts = fail_first_send(agent)
    async with agent:
        await schedules.once(chat, "k", at=clock.now() + timedelta(seconds=1), text="try again")
        await clock.advance(1)
        await settle(lambda: attempts() == 1)
        assert sent == []
        await clock.advance(1)  # the next try, one poll later (the claim lasts lease / 2)
        await settle(lambda: sent)
        await settle(rounds=50)
    assert sent == [("k", "reminder written by the model")]
    assert [kind for kind, cid, _ in seen if kind in ("schedule_failed", "schedule_fired")] == [
        "schedule_failed",
        "schedule_fired",
    ]
    assert [value for kind, _, value in seen if kind == "schedule_late_seconds"] == [1.0]  # sent a poll late
    assert await schedules.pending() == 0


async def test_a_try_again_is_judged_by_the_claim_s_lateness_not_its_own() -> None:
    """Claimed within the grace, failed once, tried again past it: sent (it was due in time; the first try may even
    have got through), with the lateness of the try that sent it."""
    clock = ManualClock()
    sent: list[tuple[str, str]] = []
    agent, schedules, _, seen = make(sent=sent, clock=clock, poll=1.0, lease=30.0, grace=1.5)
    attempts = fail_first_send(agent)
    async with agent:
        await schedules.once(chat, "m", at=clock.now() + timedelta(seconds=1), text="try again")
        await clock.advance(2)  # claimed 1 s late, within the grace of 1.5 s
        await settle(lambda: attempts() == 1)
        await clock.advance(1)  # tried again 2 s late, past it
        await settle(lambda: sent)
        await settle(rounds=50)
    assert sent == [("m", "reminder written by the model")]
    assert "schedule_missed" not in [kind for kind, _, _ in seen]
    assert [value for kind, _, value in seen if kind == "schedule_late_seconds"] == [2.0]


def test_a_firing_carries_the_tier_of_whoever_set_it() -> None:
    s = Schedule.once(
        at=datetime(2026, 1, 1, tzinfo=UTC), text="x", tier="guest", conversation="chat:a", context="chat", args="a"
    )
    assert schedule_input(s, datetime(2026, 1, 1, tzinfo=UTC)).params["tier"] == "guest"


async def test_a_queued_agent_needs_a_shared_store() -> None:
    class Queue:
        distributed = True

        async def start(self, agent: Any) -> None: ...

        async def submit(self, *args: Any, **kw: Any) -> list[Any]:
            return []

        async def stop(self) -> None: ...

    agent = create_agent(model=ScriptedModel(answer), contexts=[chat], dispatcher=Queue())
    with pytest.raises(ConfigError, match="RedisScheduleStore"):
        Schedules.attach(agent)


def test_a_reminders_timing_arguments_are_bounded() -> None:
    """What the model passes to ``set_reminder`` came from a chat: an ``at`` or ``cron`` of any length is refused
    by the schema (the model reads the error), not parsed and quoted back in full."""
    import pydantic

    from bots.reminders import SetReminderArgs

    for field in ("at", "cron"):
        with pytest.raises(pydantic.ValidationError, match="at most 100 characters"):
            SetReminderArgs.model_validate({"text": "call the bank", field: "1" * 5000})
    assert SetReminderArgs.model_validate({"text": "call the bank", "cron": "0 9 * * 1"}).cron == "0 9 * * 1"
