"""/busy and /quiet in Telegram (issue 37), through the real python-telegram-bot client and the fake Bot API: a
group's admin chooses what a message sent while the bot answers does and the quiet window (a member may look, not
change), and the bot then does it: ``queue`` answers each message on its own, a quiet window answers a burst once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from core import ModelRequest
from core.busy import QUIET_CHAT_MAX_MS
from extensions.chat.i18n import say
from extensions.telegram.definitions import MESSAGE
from tests.fakes.gated_model import GatedModel
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot

GROUP = -100500600
ANN, BOB = 1001, 1002


async def said(server: FakeTelegramServer, text: str, *, user_id: int = ANN) -> str:
    """A user writes ``text`` in the group; returns the bot's answer to it."""
    before = len([m for m in server.sent if m.chat_id == GROUP])
    server.user_says(text, user_id=user_id, first_name="Bob" if user_id == BOB else "Ann", chat_id=GROUP)
    return (await server.wait_replies(before + 1, chat_id=GROUP))[-1].text


async def test_an_admin_chooses_queue_and_each_message_sent_meanwhile_gets_its_own_answer(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    model = GatedModel(MESSAGE, shown_first=True)  # (words shown: the policy decides; before, it starts again)
    await start_bot(model, reply_policy="always")
    assert {"busy", "quiet"} <= {c["command"] for c in server.commands}

    assert await said(server, "/busy queue", user_id=BOB) == say("not_allowed", "en", setting=say("setting.busy"))
    shown = await said(server, "/busy", user_id=BOB)
    assert shown.startswith("A message sent here while I answer: as the bot is set up: steer")
    assert await said(server, "/busy queue") == say("busy_set", "en", policy=say("busy.queue"))
    assert "A message sent while I answer: queue" in await said(server, "/settings", user_id=BOB)

    server.user_says("one", user_id=ANN, chat_id=GROUP)
    await asyncio.wait_for(model.started.wait(), 10)
    await server.wait_for(lambda: any(m.text.startswith("Answer 1") for m in server.sent), timeout=10)
    server.user_says("two", user_id=BOB, first_name="Bob", chat_id=GROUP)
    server.user_says("three", user_id=ANN, chat_id=GROUP)
    await asyncio.sleep(0.3)  # (both stored before the first answer ends)
    model.release.set()
    await server.wait_for(lambda: any(m.text == "Answer 3." for m in server.sent), timeout=10)
    assert len(model.prompts) == 3  # one answer each; steer (the default) would answer two and three together
    assert "two" in model.prompts[1] and "three" not in model.prompts[1] and "three" in model.prompts[2]


async def test_an_admin_sets_a_quiet_window_and_a_burst_gets_one_answer(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    model = GatedModel(MESSAGE)
    model.release.set()
    await start_bot(model, reply_policy="always")

    assert await said(server, "/quiet 1000", user_id=BOB) == say("not_allowed", "en", setting=say("setting.quiet"))
    assert await said(server, f"/quiet {QUIET_CHAT_MAX_MS + 1}") == say(
        "quiet_unknown", "en", window=str(QUIET_CHAT_MAX_MS + 1), max=QUIET_CHAT_MAX_MS
    )
    assert await said(server, "/quiet 1000") == say("quiet_set", "en", window="1000 ms")
    for text in ("hi", "one question", "about Redis"):
        server.user_says(text, user_id=ANN, chat_id=GROUP)
    await server.wait_for(lambda: any(m.text == "Answer 1." for m in server.sent), timeout=10)
    await asyncio.sleep(0.3)
    assert len(model.prompts) == 1 and all(t in model.prompts[0] for t in ("hi", "one question", "about Redis"))

    assert await said(server, "/quiet 0") == say("quiet_off")
    assert "Quiet window: 0 ms" in await said(server, "/settings")


async def test_messages_sent_before_the_first_word_is_shown_get_one_answer_whatever_the_policy(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    """No quiet window (the default): "one" goes to the model at once; "two" and "three" arrive before a word of
    its answer is shown, so the call starts again with all three and one answer is written, under ``queue`` too."""
    server.chat(GROUP, kind="supergroup", title="Crew")
    server.admins[GROUP] = {ANN}
    model = GatedModel(MESSAGE)

    async def every_call_waits(request: ModelRequest) -> AsyncIterator[str]:  # (until the test lets them go)
        model.prompts.append(request.prompt)
        model.started.set()
        await model.release.wait()
        yield f'<response><output type="{MESSAGE}">Answer {len(model.prompts)}.</output></response>'

    model.stream = every_call_waits  # type: ignore[method-assign]
    await start_bot(model, reply_policy="always")
    assert await said(server, "/busy queue") == say("busy_set", "en", policy=say("busy.queue"))

    server.user_says("one", user_id=ANN, chat_id=GROUP)
    await asyncio.wait_for(model.started.wait(), 10)
    server.user_says("two", user_id=BOB, first_name="Bob", chat_id=GROUP)
    server.user_says("three", user_id=ANN, chat_id=GROUP)
    await server.wait_for(lambda: any("three" in p for p in model.prompts), timeout=10)  # (started again)
    model.release.set()
    await server.wait_for(lambda: any(m.text.startswith("Answer") for m in server.sent), timeout=10)
    await asyncio.sleep(0.3)
    answers = [m.text for m in server.sent if m.chat_id == GROUP and m.text.startswith("Answer")]
    assert answers == [f"Answer {len(model.prompts)}."], "one visible answer for the three"
    assert len(model.prompts) >= 2 and all(t in model.prompts[-1] for t in ("one", "two", "three"))
