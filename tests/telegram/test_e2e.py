"""End to end: the real python-telegram-bot client, long polling against the fake Bot API, scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from pydantic import SecretStr

from core import ConfigError, ModelError, ModelRequest, PlatformError, ScriptedModel, create_agent
from core.engine import FORMAT_FAILED_NOTICE
from core.memory import SQLiteHistory
from extensions.telegram import ChatArgs, TelegramSettings, telegram_chat, telegram_extension
from extensions.telegram.definitions import MODEL_DOWN
from extensions.telegram.render import render_html, utf16_len, visible_text
from extensions.telegram.runtime import FORGET_DONE, RESET_DONE
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import RunWatcher, StartBot, answer, scripted

GROUP = -100200300


class GatedModel:
    """Answers ``reply`` once ``gate(request)`` returns: lets a test hold a run open without sleeping."""

    name = "gated"
    model = ""
    vision = False
    last_usage = None

    def __init__(self, reply: str, gate: Callable[[ModelRequest], Awaitable[None]]) -> None:
        self.reply = reply
        self.gate = gate
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        await self.gate(request)
        yield answer(self.reply)


async def test_private_chat_is_answered_as_a_reply(server: FakeTelegramServer, start_bot: StartBot) -> None:
    await start_bot(["Hello **Ann** & <friends>"])
    update = server.user_says("hi there")
    [reply] = await server.wait_replies(1)
    assert reply.chat_id == 1001
    assert reply.text == "Hello Ann & <friends>"
    assert reply.raw == "Hello <b>Ann</b> &amp; &lt;friends&gt;"
    assert reply.parse_mode == "HTML"
    assert reply.reply_to == update["message"]["message_id"]
    # ("typing..." is sent beside the model call, not before it: with an instant model it may reach the server
    # after the reply, on a connection of its own)
    await server.wait_for(lambda: (1001, "typing", None) in server.chat_actions, timeout=10)
    assert [c.params["commands"] for c in server.calls_of("setMyCommands")]


async def test_the_model_sees_the_message_and_its_author(server: FakeTelegramServer, start_bot: StartBot) -> None:
    model = scripted("ok")
    await start_bot(model)
    server.user_says("what is 2+2?", first_name="Bob", username="bobby", user_id=77)
    await server.wait_replies(1)
    prompt = model.requests[0].prompt
    assert 'user="Bob"' in prompt and 'username="bobby"' in prompt and "what is 2+2?" in prompt


async def test_the_input_carries_the_update_as_correlation_id(server: FakeTelegramServer, start_bot: StartBot) -> None:
    agent = await start_bot(["ok"])
    update = server.user_says("trace me")
    await server.wait_replies(1)
    await agent.stop()
    logs = await agent.memory.get("working:telegram:chat:1001")
    assert logs is not None
    assert [entry.get("correlation_id") for entry in logs if entry["kind"] == "input"] == [
        f"telegram:{update['update_id']}"
    ]


async def test_group_message_without_mention_is_ignored_and_with_mention_answered(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = scripted("answered")
    await start_bot(model)
    server.user_says("just chatting with friends", chat_id=GROUP, kind="supergroup")
    mention = server.user_says("@daydream_test_bot what time is it?", chat_id=GROUP, kind="supergroup")
    [reply] = await server.wait_replies(1)
    assert reply.chat_id == GROUP
    assert reply.reply_to == mention["message"]["message_id"]
    assert len(model.requests) == 1  # updates are decided in order: the first never reached the agent
    assert "just chatting" not in model.requests[0].prompt


async def test_group_reply_to_the_bot_and_commands_are_answered(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    await start_bot(["first", "second", "third"])
    server.user_says("@daydream_test_bot hello", chat_id=GROUP, kind="supergroup")
    [first] = await server.wait_replies(1)
    server.user_says("and more", chat_id=GROUP, kind="supergroup", reply_to=first.message_id)
    await server.wait_replies(2)
    server.user_says("/ask@daydream_test_bot something", chat_id=GROUP, kind="supergroup")
    replies = await server.wait_replies(3)
    assert [r.text for r in replies] == ["first", "second", "third"]


async def test_reply_policy_always_answers_every_group_message(server: FakeTelegramServer, start_bot: StartBot) -> None:
    await start_bot(["here"], reply_policy="always")
    server.user_says("no mention needed", chat_id=GROUP, kind="group")
    [reply] = await server.wait_replies(1)
    assert reply.chat_id == GROUP


async def test_reply_policy_off_stays_silent_in_groups(server: FakeTelegramServer, start_bot: StartBot) -> None:
    model = scripted("only in private")
    await start_bot(model, reply_policy="off")
    server.user_says("@daydream_test_bot hello", chat_id=GROUP, kind="supergroup")
    server.user_says("/help", chat_id=GROUP, kind="supergroup")
    server.user_says("hello in private")
    [reply] = await server.wait_replies(1)
    assert reply.chat_id == 1001
    assert len(model.requests) == 1


async def test_bots_and_strangers_are_ignored(server: FakeTelegramServer, start_bot: StartBot) -> None:
    model = scripted("for you")
    await start_bot(model, allowed_users=[42])
    server.user_says("beep", user_id=500, is_bot=True, first_name="OtherBot", username="other_bot")
    server.user_says("let me in", user_id=43)
    server.user_says("hello", user_id=42)
    [reply] = await server.wait_replies(1)
    assert reply.chat_id == 42
    assert len(model.requests) == 1


async def test_forum_topics_are_separate_conversations(server: FakeTelegramServer, start_bot: StartBot) -> None:
    agent = await start_bot(["in topic 7", "in topic 9"])
    server.user_says("@daydream_test_bot one", chat_id=GROUP, kind="supergroup", thread_id=7)
    await server.wait_replies(1)
    server.user_says("@daydream_test_bot two", chat_id=GROUP, kind="supergroup", thread_id=9)
    replies = await server.wait_replies(2)
    assert [(r.thread_id, r.text) for r in replies] == [(7, "in topic 7"), (9, "in topic 9")]
    await server.wait_for(lambda: (GROUP, "typing", 9) in server.chat_actions, timeout=10)  # (beside the model call)
    await agent.stop()
    assert await agent.memory.get(f"working:telegram:chat:{GROUP}:7")
    assert await agent.memory.get(f"working:telegram:chat:{GROUP}:9")


def _long_markdown() -> str:
    paragraphs = []
    for n in range(60):
        paragraphs.append(
            f"**Part {n}.** Some _text_ with `code` and an emoji 👍🏽 and [a link](https://example.com/{n})."
        )
        if n % 15 == 7:
            paragraphs.append("```python\n" + "\n".join(f"print({i} < {i + 1})  # & more" for i in range(40)) + "\n```")
        paragraphs.append("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 2)
    text = "\n\n".join(paragraphs)
    assert len(text) >= 10_000
    return text


async def test_a_10000_character_answer_arrives_as_valid_chunks(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    text = _long_markdown()
    await start_bot(ScriptedModel([answer(text)], chunk_size=512))
    update = server.user_says("tell me everything")
    expected = visible_text(render_html(text))
    await server.wait_for(lambda: sum(len(m.text) for m in server.sent) >= len(expected) - 200)
    replies = list(server.sent)
    assert len(replies) >= 3
    assert all(r.parse_mode == "HTML" and utf16_len(r.text) <= 4096 for r in replies)
    assert [r.reply_to for r in replies] == [update["message"]["message_id"]] + [None] * (len(replies) - 1)
    # nothing lost or changed: the pieces put together show what the whole would have shown
    assert "".join(r.text for r in replies).replace("\n", "").replace(" ", "") == expected.replace("\n", "").replace(
        " ", ""
    )
    assert sum(r.raw.count("<pre>") + r.raw.count('<pre><code class="language-python">') for r in replies) >= 4


async def test_a_429_is_waited_out_and_the_reply_still_arrives(server: FakeTelegramServer, start_bot: StartBot) -> None:
    model = scripted("after the wait")
    await start_bot(model)
    server.fail("sendMessage", status=429, retry_after=1, times=2)
    server.user_says("hello")
    [reply] = await server.wait_replies(1, timeout=15)
    assert reply.text == "after the wait"
    calls = server.calls_of("sendMessage")
    assert [c.status for c in calls] == [429, 429, 200]
    assert calls[2].at - calls[0].at >= 2.0  # waited out as told, not retried at once
    assert len(model.requests) == 1  # the same reply was retried, the model was not asked again


async def test_a_parse_error_falls_back_to_plain_text(server: FakeTelegramServer, start_bot: StartBot) -> None:
    await start_bot(["Here is **bold** and `code`"])
    server.refuse_entities()
    server.user_says("hello")
    [reply] = await server.wait_replies(1)
    assert reply.parse_mode is None
    assert reply.text == "Here is **bold** and `code`"
    assert [c.status for c in server.calls_of("sendMessage")] == [400, 200]


async def test_the_same_update_delivered_twice_is_answered_once(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    update = server.user_says("only once please")
    server.push(update)  # Telegram hands out the same update_id again
    model = scripted("once")
    agent = await start_bot(model)
    await server.wait_replies(1)
    await agent.stop()  # answers everything already fetched before returning
    assert len(server.sent) == 1
    # twice at least: the poller looks again 10 ms after a look while an answer is being written (issue 51), before
    # the update is confirmed, and is handed it again: each delivery after the first is recognised and dropped
    assert server.served[update["update_id"]] >= 2
    assert len(model.requests) == 1


async def test_a_restart_with_pending_updates_answers_each_once(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    first = await start_bot(["hello one"])
    server.user_says("one", user_id=1)
    await server.wait_replies(1)
    await first.stop()
    server.user_says("two", user_id=2)  # written while the bot is down
    server.user_says("three", user_id=3)
    second = await start_bot(["hello again"])
    await server.wait_replies(3)
    await second.stop()
    assert sorted(m.chat_id for m in server.sent) == [1, 2, 3]
    assert server.pending == []


async def test_stopping_finishes_the_answer_in_flight(server: FakeTelegramServer, start_bot: StartBot) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def gate(_: ModelRequest) -> None:
        started.set()
        await release.wait()

    agent = await start_bot(GatedModel("finished", gate))
    server.user_says("slow question")
    await started.wait()
    stopping = asyncio.create_task(agent.stop())
    while agent.running:
        await asyncio.sleep(0.01)
    assert server.pending != []  # not confirmed while it is being answered: a crash now would lose nothing
    release.set()
    await stopping
    assert [m.text for m in server.sent] == ["finished"]
    assert server.pending == []  # confirmed once answered: a restart will not answer it again


async def test_a_slow_chat_does_not_hold_up_the_others(server: FakeTelegramServer, start_bot: StartBot) -> None:
    release = asyncio.Event()

    async def gate(request: ModelRequest) -> None:
        if request.metadata["context_id"] == "telegram:chat:1":
            await release.wait()

    await start_bot(GatedModel("done", gate))
    server.user_says("slow", user_id=1)
    server.user_says("fast", user_id=2)
    [fast] = await server.wait_replies(1)
    assert fast.chat_id == 2
    release.set()
    await server.wait_replies(2)


async def test_typing_is_kept_alive_for_the_whole_run(server: FakeTelegramServer, start_bot: StartBot) -> None:
    async def gate(_: ModelRequest) -> None:
        await server.wait_for(lambda: len(server.chat_actions) >= 3)

    await start_bot(GatedModel("took a while", gate), typing_interval=0.05)
    server.user_says("think hard")
    await server.wait_replies(1)
    assert all(action == (1001, "typing", None) for action in server.chat_actions[:3])


async def test_a_model_failure_gets_a_short_clear_message(server: FakeTelegramServer, start_bot: StartBot) -> None:
    await start_bot(ScriptedModel([ModelError("connection refused")]))
    update = server.user_says("hello?")
    [reply] = await server.wait_replies(1)
    assert reply.text == MODEL_DOWN
    assert reply.reply_to == update["message"]["message_id"]


async def test_a_model_that_never_answers_properly_gets_a_clear_message(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    await start_bot(ScriptedModel(["just plain text, no tags"], repeat_last=True))
    server.user_says("hello?")
    [reply] = await server.wait_replies(1)
    assert reply.text == FORMAT_FAILED_NOTICE  # a model failure, told as such (issue 47), once


async def test_start_help_and_reset(server: FakeTelegramServer, start_bot: StartBot) -> None:
    model = scripted("remembered", "fresh")
    agent = await start_bot(model)
    runs = RunWatcher(agent)
    server.user_says("/start")
    [welcome] = await server.wait_replies(1)
    assert "/reset" in welcome.text and "Daydream" in welcome.text
    server.user_says("my name is Ann")
    await runs.wait(1)
    assert await agent.memory.get("working:telegram:chat:1001")
    server.user_says("/reset")
    replies = await server.wait_replies(3)
    assert replies[-1].text == RESET_DONE
    assert await agent.memory.get("working:telegram:chat:1001") is None
    server.user_says("/help")
    await server.wait_replies(4)
    assert len(model.requests) == 1


async def test_forget_erases_history_summary_facts_and_state(
    server: FakeTelegramServer, start_bot: StartBot, tmp_path: Path
) -> None:
    history = SQLiteHistory(tmp_path / "history.sqlite3")
    agent = await start_bot(scripted("noted"), agent_options={"history": history})
    runs = RunWatcher(agent)
    server.user_says("my name is Ann")
    await runs.wait(1)
    cid = "telegram:chat:1001"
    assert await history.count(cid) == 2  # the message and the answer
    await agent.memory.set(f"context:{cid}", {"facts": ["The user's name is Ann"]})
    server.user_says("/forget")
    replies = await server.wait_replies(2)
    assert replies[-1].text == FORGET_DONE
    assert await history.count(cid) == 0 and await history.search(cid, words="Ann") == []
    for kind in ("context", "working", "statelog"):
        assert await agent.memory.get(f"{kind}:{cid}") is None


async def test_a_bad_token_is_a_clear_startup_error(server: FakeTelegramServer) -> None:
    bad = "999:not-the-right-token"
    settings = TelegramSettings(token=SecretStr(bad), api_url=server.api_url)
    agent = create_agent(model=scripted("x"), extensions=[telegram_extension(settings)])
    with pytest.raises(ConfigError) as caught:
        await agent.start()
    message = str(caught.value)
    assert "TELEGRAM_TOKEN" in message
    assert bad not in message and caught.value.__cause__ is None and caught.value.__context__ is None


async def test_an_unreachable_api_is_a_clear_startup_error(server: FakeTelegramServer) -> None:
    settings = TelegramSettings(token=SecretStr(server.token), api_url="http://127.0.0.1:9", request_timeout=2)
    agent = create_agent(model=scripted("x"), extensions=[telegram_extension(settings)])
    with pytest.raises(PlatformError, match="TELEGRAM_API_URL"):
        await agent.start()


def test_an_empty_token_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="TELEGRAM_TOKEN is empty"):
        telegram_extension(TelegramSettings())


async def test_send_only_mode_posts_without_polling(server: FakeTelegramServer, start_bot: StartBot) -> None:
    server.chat(55)
    agent = await start_bot(["from a worker"], listen=False)
    await agent.send(
        telegram_chat, ChatArgs(chat_id=55), {"type": "telegram:message", "data": "hi", "params": {"message_id": "3"}}
    )
    [reply] = server.sent
    assert reply.text == "from a worker" and reply.reply_to == 3
    # no polling (the run may have shown "typing...": a queue worker does while it answers)
    assert {c.method for c in server.calls} - {"sendChatAction"} == {"getMe", "sendMessage"}


async def test_a_reply_follows_a_group_that_became_a_supergroup(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.chat(-5, kind="group")
    server.chat(-1005, kind="supergroup")
    server.fail(
        "sendMessage",
        status=400,
        description="Bad Request: group chat was upgraded to a supergroup chat",
        parameters={"migrate_to_chat_id": -1005},
        when=lambda params: params.get("chat_id") == -5,
    )
    agent = await start_bot(["moved"], listen=False)
    await agent.send(telegram_chat, ChatArgs(chat_id=-5), {"type": "telegram:message", "data": "hi"})
    [reply] = server.sent
    assert (reply.chat_id, reply.text) == (-1005, "moved")
