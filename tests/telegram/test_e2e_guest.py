"""Telegram's guest mode (issue 54, point 2), through the real python-telegram-bot client and the fake Bot API: off by
default; when on, the answer goes where Telegram says (``answerGuestQuery``), the model sees the request alone
(never the chat's secret, even in the message the request replies to), nothing is remembered, and the summoner is the
author (tier ``summoned``, their usage)."""

from __future__ import annotations

from core import InMemoryStore, ScriptedModel
from core.usage import USAGE, InMemoryUsage, day_of
from extensions.telegram.guest import GUEST_ANSWER
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import RunWatcher, StartBot, answer

GROUP = -100777
SECRET = "the vault code is 9931"


def guest_answer(text: str) -> str:
    return f'<response><output type="{GUEST_ANSWER}">{text}</output></response>'


async def test_a_guest_request_sees_the_request_alone_and_leaves_nothing(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([guest_answer("It is **Paris**.")], repeat_last=True)
    memory = InMemoryStore()
    agent = await start_bot(model, memory=memory, guest_mode=True, agent_options={"usage": InMemoryUsage()})
    runs = RunWatcher(agent)
    secret = server.user_says(SECRET, chat_id=GROUP, kind="supergroup", title="Vault team", user_id=2002)
    update = server.user_summons(
        "what is the capital of France?", chat_id=GROUP, user_id=3003, reply_to=secret["message"]["message_id"]
    )
    query_id = update["guest_message"]["guest_query_id"]
    await server.wait_for(lambda: query_id in server.guest_answers)
    await runs.wait(1)
    assert server.guest_answers[query_id]["text"] == "It is Paris."
    assert not server.sent  # the answer went where Telegram says, nothing posted in the chat
    [request] = model.requests
    assert "capital of France" in request.prompt
    assert "9931" not in request.prompt and "vault" not in request.prompt.lower()
    assert 'tier="summoned"' in request.prompt and 'user_id="3003"' in request.prompt
    assert (await agent.provided(USAGE).totals("user:telegram:3003", [day_of()])).tokens > 0  # the summoner's usage
    kept = [key for key in memory.data if query_id in key]  # nothing of the request is remembered
    assert kept == [], kept


async def test_guest_mode_is_off_by_default(server: FakeTelegramServer, start_bot: StartBot) -> None:
    model = ScriptedModel([answer("hello")], repeat_last=True)
    await start_bot(model)
    server.user_summons("hello?", chat_id=GROUP)
    server.user_says("hi")  # a message after it: once it is answered, the guest request was seen and left
    await server.wait_replies(1)
    assert server.guest_answers == {} and len(model.requests) == 1


async def test_a_guest_request_from_someone_outside_the_allowed_users_is_left(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel([guest_answer("ok")], repeat_last=True)
    await start_bot(model, guest_mode=True, allowed_users=[3003])
    stranger = server.user_summons("hello?", chat_id=GROUP, user_id=4004)
    allowed = server.user_summons("hello?", chat_id=GROUP, user_id=3003)
    query = allowed["guest_message"]["guest_query_id"]
    await server.wait_for(lambda: query in server.guest_answers)
    assert stranger["guest_message"]["guest_query_id"] not in server.guest_answers and len(model.requests) == 1
