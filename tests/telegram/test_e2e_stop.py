"""/stop in Telegram (issue 37), through the real python-telegram-bot client and the fake Bot API: during a slow
streamed answer it cancels the model call, the answer keeps what was written with its mark, no later action runs,
and the next message is answered; with nothing being written it says so. In a group only the people the answer is
for and the group's administrators may stop it (issue 49)."""

from __future__ import annotations

import asyncio

import pytest

from core import action
from core.engine import STOP_MARK
from extensions.chat.i18n import say
from extensions.telegram.definitions import MESSAGE
from tests.fakes.slow_model import EndlessModel
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import RunWatcher, StartBot

GROUP = -100300400


@pytest.mark.parametrize("stopper", ["author", "admin"])
async def test_stop_in_a_group_is_for_the_asker_and_the_admins_only(
    server: FakeTelegramServer, start_bot: StartBot, stopper: str
) -> None:
    """Issue 49, point 6: a group member the answer is not for is refused, however often; the asker and an
    administrator of the group stop it."""
    model, ran = EndlessModel(MESSAGE), []
    later = action(name="later", handler=lambda args, ctx, agent: ran.append(1))
    server.chat(GROUP, kind="supergroup")
    server.admins[GROUP] = {3003}
    agent = await start_bot(model, stream_interval=0.05, reply_policy="always", agent_options={"actions": [later]})
    runs = RunWatcher(agent)
    server.user_says("tell me a story", chat_id=GROUP, user_id=1001)
    await asyncio.wait_for(model.writing.wait(), 10)
    await server.wait_for(lambda: any("Once upon a time" in m.text for m in server.sent), timeout=10)
    for _ in range(2):
        server.user_says("/stop", chat_id=GROUP, user_id=2002, first_name="Bo", username="bo")
    await server.wait_for(lambda: [m.text for m in server.sent].count(say("stop_not_yours")) == 2, timeout=10)
    assert not model.cancelled and runs.finished == 0

    if stopper == "author":
        server.user_says("/stop", chat_id=GROUP, user_id=1001)
    else:
        server.user_says("/stop", chat_id=GROUP, user_id=3003, first_name="Cy", username="cy")
    await runs.wait(1)
    assert model.cancelled and ran == []
    await server.wait_for(lambda: any(m.text == say("stop_done") for m in server.sent), timeout=10)
    [story] = [m for m in server.sent if m.text.startswith("Once upon a time")]
    assert story.text.endswith(STOP_MARK.strip())
    asked = [c.params.get("user_id") for c in server.calls_of("getChatMember")]
    assert 1001 not in asked  # the asker is known from the answer: Telegram is not asked about them

    server.user_says("and now?", chat_id=GROUP)
    await server.wait_for(lambda: any(m.text == "Short answer 2." for m in server.sent), timeout=10)
    assert "and now?" in model.prompts[1] and "Once upon a time" in model.prompts[1]  # the stopped answer is kept


async def test_stop_with_nothing_being_written_says_so(server: FakeTelegramServer, start_bot: StartBot) -> None:
    await start_bot(["hello"])
    server.user_says("/stop")
    [notice] = await server.wait_replies(1)
    assert notice.text == say("stop_nothing")
    assert [c for c in server.calls_of("setMyCommands") if "stop" in str(c.params["commands"])]


async def test_telegrams_stop_button_on_a_draft_stops_the_answer(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = EndlessModel(MESSAGE)
    agent = await start_bot(model, stream_interval=0.05, stream_drafts=True)
    runs = RunWatcher(agent)
    server.user_says("tell me a story", user_id=1001)
    await asyncio.wait_for(model.writing.wait(), 10)
    await server.wait_for(lambda: any("Once upon a time" in text for _, _, text in server.drafts), timeout=10)
    [(chat_id, draft_id, _), *_] = server.drafts
    assert server.stoppable_drafts[(chat_id, draft_id)] is True  # can_stop, and keep_on_stop
    server.user_stops_draft(chat_id, draft_id)
    await runs.wait(1)
    assert model.cancelled
    [story] = await server.wait_replies(1)
    assert story.text.startswith("Once upon a time") and story.text.endswith(STOP_MARK.strip())
    asked = [c.params.get("allowed_updates") for c in server.calls_of("getUpdates")]
    assert all("stopped_message_generation" in str(a) for a in asked)
