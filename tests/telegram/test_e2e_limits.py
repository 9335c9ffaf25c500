"""End to end through python-telegram-bot and the fake Bot API: a user over a limit gets one short notice per window,
and the model is not asked."""

from __future__ import annotations

from core import LimitConfig, Limiter
from extensions.telegram.runtime import RESET_DONE, RESET_REFUSED
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import StartBot, scripted


async def test_over_the_limit_the_user_is_told_once_and_the_model_is_not_called(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = scripted("hello")
    await start_bot(
        model,
        agent_options={
            "limiter": Limiter(LimitConfig(messages_per_minute=2, message_window=86_400, max_input_chars=100))
        },
    )
    for i in range(5):
        server.user_says(f"message {i}")
        await server.wait_replies(min(i + 1, 3))
    server.user_says("x" * 101)
    replies = await server.wait_replies(4)  # in order: messages 3 and 4 were decided before it
    texts = [r.text for r in replies]
    assert texts[:2] == ["hello", "hello"]
    assert "at most 2 in 24 hours" in texts[2] and "try again in" in texts[2]  # once, not for messages 3 and 4
    assert "too long" in texts[3]
    assert len(model.requests) == 2
    assert all(r.reply_to is not None for r in replies)  # each notice answers the message it is about


async def test_in_a_group_reset_needs_a_chat_administrator_or_an_admin_user(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    group = -100777
    agent = await start_bot(
        scripted("noted"), agent_options={"limiter": Limiter(LimitConfig(admins=frozenset({"telegram:55"})))}
    )
    server.admins[group] = {44}
    server.user_says("@daydream_test_bot remember the code word", chat_id=group, kind="supergroup", user_id=33)
    await server.wait_replies(1)
    stored = f"working:telegram:chat:{group}"
    server.user_says("/reset", chat_id=group, kind="supergroup", user_id=33)  # a member
    [_, refused] = await server.wait_replies(2)
    assert refused.text == RESET_REFUSED and await agent.memory.get(stored)
    server.user_says("/reset", chat_id=group, kind="supergroup", user_id=44)  # a chat administrator
    [*_, done] = await server.wait_replies(3)
    assert done.text == RESET_DONE and not await agent.memory.get(stored)
    server.user_says("@daydream_test_bot again", chat_id=group, kind="supergroup", user_id=33)
    await server.wait_replies(4)
    server.user_says("/reset", chat_id=group, kind="supergroup", user_id=55)  # an admin user of the bot
    [*_, done] = await server.wait_replies(5)
    assert done.text == RESET_DONE and not await agent.memory.get(stored)
    asked = [c.params["user_id"] for c in server.calls_of("getChatMember")]
    assert asked == [33, 44]  # the admin user is known without asking Telegram
