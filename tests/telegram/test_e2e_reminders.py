"""Reminders end to end with the bot ``build_agent`` builds (SQLite under ``BOT_DATA_DIR``, the default
assistant's actions), the real python-telegram-bot client and the fake Bot API: a user asks for a reminder in two
seconds (a scripted model calls ``set_reminder``) and it arrives once, in their chat; ``/reminders`` lists and
cancels with the inline keyboard (whoever set one, or a chat admin); a recurring one fires at each occurrence;
``/timezone`` sets the zone a reminder's time is read in; the limits; a chat that blocked the bot loses its
schedules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bots.reminders import reminder_actions
from core import ModelRequest, ScriptedModel
from core.entries import now_ms
from core.schedules import ManualClock, schedules_of
from core.usage import USAGE, day_of
from extensions.telegram import ChatArgs, telegram_chat
from tests.fakes.telegram_server import FakeTelegramServer, SentMessage
from tests.schedules.support import StartBot, call, last_result, recurring_model, started_bots

GROUP = -100777
ANN, BOB, CAROL = 1001, 1002, 1003
START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # a Monday


def reply(text: str) -> str:
    return f'<response><output type="telegram:message">{text}</output></response>'


@pytest.fixture
async def bots(server: FakeTelegramServer, tmp_path: Path) -> AsyncIterator[StartBot]:
    platform = {"token": server.token, "api_url": server.api_url, "poll_timeout": 10}
    async with started_bots(tmp_path, "telegram", telegram=platform) as start:
        yield start


async def eventually(check: Callable[[], Any], *, timeout: float = 10.0) -> None:
    """Wait until the coroutine function ``check`` answers true (the store moves on after the post)."""
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.02)


async def said(server: FakeTelegramServer, text: str, *, user_id: int = ANN, chat_id: int = GROUP) -> SentMessage:
    """A user writes ``text``; the bot's answer to it."""
    before = len([m for m in server.sent if m.chat_id == chat_id])
    server.user_says(text, user_id=user_id, first_name=f"User {user_id}", chat_id=chat_id)
    return (await server.wait_replies(before + 1, chat_id=chat_id))[-1]


async def test_a_reminder_asked_for_in_two_seconds_arrives_once_in_the_right_chat(
    server: FakeTelegramServer, bots: Callable[..., Any]
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    model = ScriptedModel(
        [
            call("set_reminder", {"text": "remind Ann to stretch", "in_seconds": 2}),
            lambda request: reply(f"Done: {last_result(request)}"),
            lambda request: reply("Ann, time to stretch!" if "remind Ann to stretch" in request.prompt else "?"),
        ]
    )
    agent = await bots(model)
    answer = await said(server, "remind me in 2 seconds to stretch", chat_id=ANN)
    assert answer.text.startswith("Done:") and " is set for " in answer.text and "repeats" not in answer.text
    [reminder] = await schedules_of(agent).by_conversation(f"telegram:chat:{ANN}")
    assert reminder.creator == f"telegram:{ANN}" and reminder.tier == "member" and reminder.tz == "UTC"

    [_, fired] = await server.wait_replies(2, chat_id=ANN, timeout=15)
    assert fired.text == "Ann, time to stretch!"
    await asyncio.sleep(1.0)  # a second firing would show now
    assert [m.text for m in server.sent if m.chat_id == ANN] == [answer.text, "Ann, time to stretch!"]
    assert [m for m in server.sent if m.chat_id == GROUP] == []

    async def none_left() -> bool:
        return await schedules_of(agent).pending() == 0

    await eventually(none_left)
    firing = model.requests[-1].prompt
    assert "It is time for a one-time schedule set by telegram:1001" in firing


async def test_reminders_lists_and_cancels_with_the_buttons(
    server: FakeTelegramServer, bots: Callable[..., Any]
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {CAROL}
    clock = ManualClock(START)
    agent = await bots(ScriptedModel([reply("ok")], repeat_last=True), clock)
    schedules = schedules_of(agent)
    where = (telegram_chat, ChatArgs(chat_id=GROUP))
    anns = await schedules.once(
        *where, at=START + timedelta(hours=1), text="water the plants", creator=f"telegram:{ANN}"
    )
    bobs = await schedules.cron(*where, "0 9 * * 1", text="weekly agenda", creator=f"telegram:{BOB}", tz="Europe/Paris")
    await schedules.once(
        telegram_chat, ChatArgs(chat_id=ANN), at=START + timedelta(hours=2), text="elsewhere", creator=f"telegram:{ANN}"
    )

    listing = await said(server, "/reminders", user_id=BOB)
    lines = listing.text.splitlines()
    assert lines[0] == "Reminders and scheduled messages in this chat (2):"
    assert lines[1] == f"{anns.id[:6]} · 2026-03-02 09:00 UTC · once · telegram:{ANN}: water the plants"
    assert lines[2] == f"{bobs.id[:6]} · 2026-03-09 09:00 Europe/Paris · cron 0 9 * * 1 · telegram:{BOB}: weekly agenda"
    assert listing.buttons == {
        f"Cancel {anns.id[:6]}": f"cfg:reminders:cancel:{anns.id}",
        f"Cancel {bobs.id[:6]}": f"cfg:reminders:cancel:{bobs.id}",
    }

    server.user_presses(listing, f"Cancel {anns.id[:6]}", user_id=BOB)  # not Bob's, and Bob is no admin
    await server.wait_for(lambda: len(server.callback_answers) == 1)
    assert (
        server.callback_answers[-1]["text"] == f"Only whoever set {anns.id[:6]} and this chat's admins can cancel it."
    )
    assert listing.edits == [] and await schedules.get(anns.id) is not None

    server.user_presses(listing, f"Cancel {bobs.id[:6]}", user_id=BOB)  # his own
    await server.wait_for(lambda: bool(listing.edits))
    assert listing.text.startswith(f"Cancelled {bobs.id[:6]}.\n\nReminders and scheduled messages in this chat (1):")
    assert listing.buttons == {f"Cancel {anns.id[:6]}": f"cfg:reminders:cancel:{anns.id}"}  # what is left
    assert await schedules.get(bobs.id) is None

    server.user_presses(listing, f"Cancel {anns.id[:6]}", user_id=CAROL)  # a chat admin may cancel anyone's
    await server.wait_for(lambda: len(listing.edits) == 2)
    assert listing.text == f"Cancelled {anns.id[:6]}.\n\nNo reminders or scheduled messages in this chat."
    assert listing.buttons == {}
    assert [s.text for s in await schedules.by_creator(f"telegram:{ANN}")] == ["elsewhere"]  # another chat's

    again = await said(server, f"/reminders cancel {anns.id[:6]}", user_id=CAROL)
    assert again.text == f"There is no reminder {anns.id[:6]} in this chat; /reminders lists them."


async def test_a_recurring_reminder_fires_at_each_occurrence_in_the_chats_time_zone(
    server: FakeTelegramServer, bots: Callable[..., Any]
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    clock = ManualClock(START)
    model = recurring_model({"text": "announce the stand-up", "cron": "30 9 * * *"}, reply, lambda n: f"Stand-up #{n}")
    agent = await bots(model, clock)
    zone = await said(server, "/timezone europe/paris")
    assert zone.text == "Done: this chat's time zone is now Europe/Paris."
    assert "Time zone: Europe/Paris" in (await said(server, "/settings")).text
    answer = await said(server, "@daydream_test_bot every day at 9:30 announce the stand-up")
    assert "is set for 2026-03-02 09:30 Europe/Paris, and then again as it repeats" in answer.text
    [daily] = await schedules_of(agent).by_conversation(f"telegram:chat:{GROUP}")
    assert daily.next_fire_at == datetime(2026, 3, 2, 8, 30, tzinfo=UTC)  # 9:30 in Paris (UTC+1 in March)

    for day in range(3):
        await clock.set(datetime(2026, 3, 2 + day, 8, 30, tzinfo=UTC))
        await server.wait_replies(4 + day, chat_id=GROUP)
    texts = [m.text for m in server.sent if m.chat_id == GROUP][-3:]
    assert texts == ["Stand-up #1", "Stand-up #2", "Stand-up #3"]

    async def fired_thrice() -> bool:
        return (await schedules_of(agent).by_conversation(f"telegram:chat:{GROUP}"))[0].fired == 3

    await eventually(fired_thrice)
    [daily] = await schedules_of(agent).by_conversation(f"telegram:chat:{GROUP}")
    assert daily.fired == 3 and daily.next_fire_at == datetime(2026, 3, 5, 8, 30, tzinfo=UTC)


async def test_a_time_from_now_written_as_at_is_read_and_an_unreadable_one_is_refused_without_a_traceback(
    server: FakeTelegramServer, bots: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """The embedded model, asked "Remind me in 2 minutes to stretch.", wrote ``at: "2 minutes from now"`` twice:
    refused as no date and time, logged as a bug with its traceback in the terminal chat, and no reminder set; and
    for "in 1 minute", ``at: "2023-04-15 14:00"`` beside ``in_minutes: 1``, both refused."""
    model = ScriptedModel(
        [
            call("set_reminder", {"text": "remind Ann to stretch", "at": "2 minutes from now"}),
            lambda request: reply(f"1: {last_result(request)}"),
            call("set_reminder", {"text": "remind Ann to rest", "at": "when the moon is blue"}),
            lambda request: reply(f"2: {last_result(request)}"),
            call("set_reminder", {"text": "remind Ann to drink", "at": "2023-04-15 14:00", "in_minutes": 1}),
            lambda request: reply(f"3: {last_result(request)}"),
        ]
    )
    agent = await bots(model, ManualClock(START))
    first = await said(server, "remind me in 2 minutes to stretch", chat_id=ANN)
    assert "is set for 2026-03-02 08:02 UTC." in first.text
    [reminder] = await schedules_of(agent).by_conversation(f"telegram:chat:{ANN}")
    assert reminder.next_fire_at == START + timedelta(minutes=2)
    second = await said(server, "remind me when the moon is blue", chat_id=ANN)
    assert "at='when the moon is blue' is not a date and time: write YYYY-MM-DD HH:MM" in second.text
    assert not [r for r in caplog.records if r.levelname == "WARNING" and "set_reminder" in r.getMessage()]
    third = await said(server, "remind me in a minute to drink", chat_id=ANN)  # (a past at beside a time from now)
    assert "is set for 2026-03-02 08:01 UTC." in third.text


async def test_limits_and_who_may_set_the_zone(server: FakeTelegramServer, bots: Callable[..., Any]) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    clock = ManualClock(START)
    model = ScriptedModel(
        [
            call("set_reminder", {"text": "one", "in_minutes": 10}),
            lambda request: reply(f"1: {last_result(request)}"),
            call("set_reminder", {"text": "two", "in_minutes": 20}),
            lambda request: reply(f"2: {last_result(request)}"),
            call("set_reminder", {"text": "too often", "every_minutes": 1}),
            lambda request: reply(f"3: {last_result(request)}"),
            call("set_reminder", {"text": "past", "at": "2026-03-02 07:00"}),
            lambda request: reply(f"4: {last_result(request)}"),
        ]
    )
    agent = await bots(model, clock, schedules_per_user=1, schedules_min_interval=300)
    first = await said(server, "@daydream_test_bot remind me of one")
    assert first.text.startswith("1:") and " is set for " in first.text
    second = await said(server, "@daydream_test_bot remind me of two")
    assert "you already have 1 active schedules (at most 1): cancel one first" in second.text
    third = await said(server, "@daydream_test_bot every minute", user_id=BOB)
    assert "a recurring reminder repeats at most every 5 minutes here" in third.text
    fourth = await said(server, "@daydream_test_bot at 7", user_id=BOB)
    assert "2026-03-02 07:00 UTC has passed (it is 2026-03-02 08:00 UTC)" in fourth.text
    assert [s.text for s in await schedules_of(agent).by_conversation(f"telegram:chat:{GROUP}")] == ["one"]

    refused = await said(server, "/timezone Asia/Tokyo", user_id=BOB)  # Bob administers nothing
    assert refused.text == "Sorry, only this chat's admins can change the time zone here."
    unknown = await said(server, "/timezone Mars/Olympus", user_id=BOB, chat_id=BOB)
    assert unknown.text.startswith("Mars/Olympus is not a time zone I know")


async def test_a_chat_that_blocked_the_bot_loses_its_schedules(
    server: FakeTelegramServer, bots: Callable[..., Any]
) -> None:
    clock = ManualClock(START)
    agent = await bots(ScriptedModel([reply("ok")], repeat_last=True), clock)
    schedules = schedules_of(agent)
    dropped: list[str] = []
    agent.add_observer(lambda kind, cid, value: dropped.append(cid) if kind == "schedule_dropped" else None)
    await schedules.every(telegram_chat, ChatArgs(chat_id=ANN), 600, text="Drink water", creator=f"telegram:{ANN}")
    await schedules.once(telegram_chat, ChatArgs(chat_id=BOB), at=START + timedelta(hours=1), text="Bob's")
    server.fail(
        "sendMessage",
        status=403,
        description="Forbidden: bot was blocked by the user",
        times=5,
        when=lambda params: int(params["chat_id"]) == ANN,
    )
    await clock.advance(600)
    # (the observer's list, not the fake's state: server.wait_for looks again only at the fake's next request, and
    # after the refused post that is the long poll's return 10 s later, its own deadline)
    async with asyncio.timeout(30):
        while not dropped:
            await asyncio.sleep(0.02)
    assert dropped == [f"telegram:chat:{ANN}"]
    assert await schedules.by_conversation(f"telegram:chat:{ANN}") == []
    assert [s.text for s in await schedules.by_conversation(f"telegram:chat:{BOB}")] == ["Bob's"]


async def test_a_firing_counts_against_the_limits_of_whoever_set_it(
    server: FakeTelegramServer, bots: Callable[..., Any]
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    clock = ManualClock(START)
    model = ScriptedModel(
        lambda request: reply("Reminder: " + ("Bob's" if "Bob's thing" in request.prompt else "Ann's"))
    )
    agent = await bots(model, clock, tokens_per_day_user=10_000)  # (a call's prompt is a few thousand tokens)
    schedules = schedules_of(agent)
    await agent.provided(USAGE).add(
        day=day_of(now_ms()), keys=[f"user:telegram:{ANN}"], input_tokens=10_000, output_tokens=0, cost=0
    )  # Ann spent her day's tokens
    where = (telegram_chat, ChatArgs(chat_id=GROUP))
    await schedules.once(*where, at=START + timedelta(minutes=1), text="Ann's thing", creator=f"telegram:{ANN}")
    await schedules.once(*where, at=START + timedelta(minutes=2), text="Bob's thing", creator=f"telegram:{BOB}")
    await clock.advance(60)
    [refused] = await server.wait_replies(1, chat_id=GROUP)
    assert refused.text.startswith("Sorry, you have used up what I can answer you today.")
    await clock.advance(60)
    [_, answered] = await server.wait_replies(2, chat_id=GROUP)
    assert answered.text == "Reminder: Bob's"
    assert len(model.requests) == 1  # Ann's firing never reached the model


async def test_a_group_that_removed_the_bot_loses_its_schedules_at_once(
    server: FakeTelegramServer, bots: Callable[..., Any]
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.chat(ANN)
    clock = ManualClock(START)
    agent = await bots(ScriptedModel([reply("ok")], repeat_last=True), clock)
    schedules = schedules_of(agent)
    where = (telegram_chat, ChatArgs(chat_id=GROUP))
    await schedules.cron(*where, "0 9 * * 1", text="weekly agenda", creator=f"telegram:{ANN}")
    await schedules.once(telegram_chat, ChatArgs(chat_id=ANN), at=START + timedelta(days=1), text="Ann's own")
    server.bot_membership(ANN, "member")  # nothing to drop: the bot is still there
    server.bot_membership(GROUP, "kicked")

    async def dropped() -> bool:
        return await schedules.by_conversation(f"telegram:chat:{GROUP}") == []

    await eventually(dropped)
    assert [s.text for s in await schedules.by_conversation(f"telegram:chat:{ANN}")] == ["Ann's own"]
    assert server.sent == []  # found out without posting anything


async def test_the_model_cancels_for_whoever_set_it_or_a_chat_admin(
    server: FakeTelegramServer, bots: Callable[..., Any]
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {CAROL}
    clock = ManualClock(START)

    def cancel(request: ModelRequest) -> str:
        assert f"{anns.id[:6]}, at 2026-03-02 09:00 UTC, once, set by telegram:{ANN}: Ann's." in last_result(request)
        return call("cancel_reminder", {"id": anns.id[:6]})

    model = ScriptedModel(
        [
            call("list_reminders", {}),
            cancel,
            lambda request: reply(f"Bob: {last_result(request)}"),
            call("list_reminders", {}),
            cancel,
            lambda request: reply(f"Carol: {last_result(request)}"),
        ]
    )
    agent = await bots(model, clock)
    schedules = schedules_of(agent)
    anns = await schedules.once(
        telegram_chat, ChatArgs(chat_id=GROUP), at=START + timedelta(hours=1), text="Ann's", creator=f"telegram:{ANN}"
    )
    bob = await said(server, "@daydream_test_bot cancel Ann's reminder", user_id=BOB)
    assert "only whoever set this reminder, or this chat's admins, may cancel it" in bob.text
    assert await schedules.get(anns.id) is not None
    carol = await said(server, "@daydream_test_bot cancel Ann's reminder", user_id=CAROL)
    assert f"Reminder {anns.id[:6]} is cancelled." in carol.text
    assert await schedules.get(anns.id) is None


async def test_bot_admin_users_may_cancel_anyones_reminder_in_the_chat(
    server: FakeTelegramServer, bots: Callable[..., Any]
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")  # Bob administers nothing here: BOT_ADMIN_USERS lists him
    clock = ManualClock(START)
    by_model: list[str] = []  # the id the model is asked to cancel
    model = ScriptedModel(
        [
            lambda request: call("cancel_reminder", {"id": by_model[0]}),
            lambda request: reply(f"Bob: {last_result(request)}"),
        ]
    )
    agent = await bots(model, clock, admin_users=f"telegram:{BOB}")
    schedules = schedules_of(agent)
    where = (telegram_chat, ChatArgs(chat_id=GROUP))
    first = await schedules.once(*where, at=START + timedelta(hours=1), text="Ann's one", creator=f"telegram:{ANN}")
    second = await schedules.once(*where, at=START + timedelta(hours=2), text="Ann's two", creator=f"telegram:{ANN}")

    listing = await said(server, "/reminders", user_id=BOB)
    server.user_presses(listing, f"Cancel {first.id[:6]}", user_id=BOB)  # the button
    await server.wait_for(lambda: bool(listing.edits))
    assert listing.text.startswith(f"Cancelled {first.id[:6]}.")
    assert await schedules.get(first.id) is None

    by_model.append(second.id[:6])  # the model's cancel_reminder
    answer = await said(server, "@daydream_test_bot cancel Ann's reminder", user_id=BOB)
    assert f"Reminder {second.id[:6]} is cancelled." in answer.text
    assert await schedules.pending() == 0


async def test_the_chat_limit_counts_everyone_s_reminders(server: FakeTelegramServer, bots: Callable[..., Any]) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    model = ScriptedModel(
        [
            call("set_reminder", {"text": "Ann's", "in_minutes": 10}),
            lambda request: reply(f"1: {last_result(request)}"),
            call("set_reminder", {"text": "Bob's", "in_minutes": 20}),
            lambda request: reply(f"2: {last_result(request)}"),
        ]
    )
    agent = await bots(model, ManualClock(START), schedules_per_chat=1, schedules_per_user=5)
    assert " is set for " in (await said(server, "@daydream_test_bot remind me", user_id=ANN)).text
    refused = await said(server, "@daydream_test_bot remind me too", user_id=BOB)
    assert f"telegram:chat:{GROUP} already has 1 active schedules (at most 1): cancel one first" in refused.text
    assert [s.text for s in await schedules_of(agent).by_conversation(f"telegram:chat:{GROUP}")] == ["Ann's"]


def test_the_reminders_results_read_as_sentences() -> None:
    """What the model reads of ``set_reminder`` and ``list_reminders``: sentences. ``reminders: none, count: 0``
    was the embedded model's answer itself, twice refused; one reminder shown with ``·`` between its fields was read
    as two."""
    set_reminder, list_reminders, cancel_reminder = reminder_actions()
    assert set_reminder.format and list_reminders.format and cancel_reminder.format
    assert set_reminder.format({"id": "c02bc7", "next": "2026-12-01 13:20 UTC", "recurring": False}) == (
        "Reminder c02bc7 is set for 2026-12-01 13:20 UTC."
    )
    assert list_reminders.format({"reminders": [], "count": 0}) == "No reminders are set in this chat."
    one = {"reminders": ["c02bc7 · 2026-12-01 13:20 UTC · once · telegram:1: call the bank"], "count": 1}
    assert list_reminders.format(one) == (
        "One reminder is set in this chat: c02bc7, at 2026-12-01 13:20 UTC, once, set by telegram:1: call the bank."
    )
    assert cancel_reminder.format({"cancelled": "c02bc7"}) == "Reminder c02bc7 is cancelled."
