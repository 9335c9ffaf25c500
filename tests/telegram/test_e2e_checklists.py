"""End to end: Telegram Business and checklists (Bot API 9.1), the real python-telegram-bot client against the fake
Bot API. A business account connects the bot; a person writing to that account is answered on its behalf (through
the connection); the model posts a checklist there, the person marks a task done, the bot reads it and answers under
the checklist, and changes the checklist (a task added; the one done stays done). In a chat the bot does not reach
through a business connection the checklist is refused, and the model is told why."""

from __future__ import annotations

import json
import re

import pytest
from telegram import Bot, InputChecklist, InputChecklistTask
from telegram.error import BadRequest

from core import ModelRequest, ScriptedModel
from extensions.telegram.definitions import CHECKLIST, NO_BUSINESS, ChatArgs, telegram_chat
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import RunWatcher, StartBot, answer

TASKS = ["Book the van", "Pack the books"]
MOVE = {"title": "Moving day", "tasks": TASKS}
_CHECKLIST_ID = re.compile(r'type="telegram:checklist_tasks"[^>]*message_id="(\d+)"')


def _checklist(content: dict[str, object]) -> str:
    return f'<response><output type="{CHECKLIST}">{json.dumps(content)}</output></response>'


def mover(request: ModelRequest) -> str:
    """The model: a checklist for a move; once a task is marked done, the checklist gains a task and Ann an answer."""
    found = _CHECKLIST_ID.search(request.prompt)
    if found is None:
        return _checklist(MOVE)
    if "Clean the flat" in request.prompt:  # (the checklist was changed: later inputs)
        return answer("Noted.")
    more = {"title": "Moving day", "tasks": [*TASKS, "Clean the flat"], "replace": int(found.group(1))}
    return (
        f'<response><output type="{CHECKLIST}">{json.dumps(more)}</output>'
        '<output type="telegram:message">Well done, Ann: the van is booked. I added the cleaning.</output></response>'
    )


async def test_a_checklist_posted_for_a_business_its_task_marked_done_read_and_answered(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel(mover)
    agent = await start_bot(model)
    runs = RunWatcher(agent)
    server.connect_business("biz-1", owner_id=2001, first_name="Bea's Moves")
    asked = server.user_says("help me plan my move", user_id=1001, first_name="Ann", business="biz-1")
    await server.wait_for(lambda: bool(server.checklists), timeout=30)
    [((chat_id, message_id), checklist)] = server.checklists.items()
    assert chat_id == 1001 and checklist["title"] == "Moving day"
    assert [t["text"] for t in checklist["tasks"]] == ["Book the van", "Pack the books"]
    assert checklist.get("others_can_mark_tasks_as_done") and checklist.get("others_can_add_tasks")
    [create] = server.calls_of("sendChecklist")
    assert create.params["business_connection_id"] == "biz-1"
    assert create.params["reply_parameters"]["message_id"] == asked["business_message"]["message_id"]
    await runs.wait(1, timeout=30)
    first = model.requests[0].prompt
    assert "help me plan my move" in first and "on its behalf" in first  # (the business chat's instructions)

    server.user_marks_tasks(1001, message_id, done=[1], user_id=1001, first_name="Ann")
    [reply] = await server.wait_replies(1, timeout=30)
    assert reply.text == "Well done, Ann: the van is booked. I added the cleaning."
    assert reply.business_connection_id == "biz-1"  # on the business account's behalf
    assert reply.reply_to == message_id  # threaded under the checklist
    assert "Ann marked 'Book the van' as done in the checklist 'Moving day'" in model.requests[1].prompt
    await server.wait_for(lambda: len(server.checklists[(1001, message_id)]["tasks"]) == 3, timeout=30)
    tasks = server.checklists[(1001, message_id)]["tasks"]
    assert [t["text"] for t in tasks] == ["Book the van", "Pack the books", "Clean the flat"]
    assert tasks[0]["completed_by_user"]["id"] == 1001 and "completed_by_user" not in tasks[1]  # (still done)
    [edit] = server.calls_of("editMessageChecklist")
    assert edit.params["business_connection_id"] == "biz-1" and edit.params["message_id"] == message_id

    # a task the person adds reaches the model too; what the account's owner writes in the chat is not answered
    server.user_adds_tasks(1001, message_id, ["Return the keys"], user_id=1001, first_name="Ann")
    await server.wait_for(lambda: any("Return the keys" in r.prompt for r in model.requests), timeout=30)
    assert "Ann added 'Return the keys' to the checklist 'Moving day'" in model.requests[-1].prompt
    asked_of_model = len(model.requests)
    server.user_says("I'll call you tomorrow, Ann", user_id=2001, chat_id=1001, first_name="Bea", business="biz-1")
    server.user_says("thanks!", user_id=1001, first_name="Ann", business="biz-1")
    await server.wait_for(lambda: any("thanks!" in r.prompt for r in model.requests[asked_of_model:]), timeout=30)
    assert not any("call you tomorrow" in r.prompt for r in model.requests)
    refused = [c.method for c in server.calls if c.params.get("chat_id") == 1001 and c.status != 200]
    assert refused == []  # everything the bot wrote there (typing too) went through the connection


async def test_a_checklist_in_a_chat_without_a_business_connection_is_refused_with_the_reason(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    model = ScriptedModel(
        [_checklist(MOVE), answer("I can only post checklists for a business: 1. Book the van 2. Pack the books")]
    )
    await start_bot(model)
    server.user_says("help me plan my move", user_id=1002, first_name="Bob")
    [reply] = await server.wait_replies(1, timeout=30)
    assert reply.text.startswith("I can only post checklists for a business")
    assert reply.business_connection_id is None
    assert NO_BUSINESS in model.requests[1].prompt  # the model was told why, and told the person
    assert server.calls_of("sendChecklist") == [] and server.checklists == {}


async def test_the_fake_refuses_checklists_as_telegram_does(server: FakeTelegramServer) -> None:
    server.connect_business("biz-1")
    server.user_says("hello", user_id=1001, business="biz-1")

    def tasks(count: int) -> list[InputChecklistTask]:
        return [InputChecklistTask(id=n, text=f"task {n}") for n in range(1, count + 1)]

    async with Bot(server.token, base_url=server.base_url) as bot:
        for checklist, refused in [
            (InputChecklist(title="Too long", tasks=tasks(31)), "1-30 tasks"),
            (InputChecklist(title="x" * 256, tasks=tasks(1)), "title must be 1-255"),
        ]:
            with pytest.raises(BadRequest, match=refused):
                await bot.send_checklist(business_connection_id="biz-1", chat_id=1001, checklist=checklist)
        for connection, refused in [
            ("", "business_connection_id is required"),
            ("biz-9", "(?i)business_connection_invalid"),
        ]:
            with pytest.raises(BadRequest, match=refused):
                await bot.send_checklist(
                    business_connection_id=connection, chat_id=1001, checklist=InputChecklist("Ok", tasks(30))
                )
        sent = await bot.send_checklist(
            business_connection_id="biz-1", chat_id=1001, checklist=InputChecklist("Ok", tasks(30))
        )
        assert sent.checklist is not None and len(sent.checklist.tasks) == 30
        assert sent.sender_business_bot is not None and sent.business_connection_id == "biz-1"
        with pytest.raises(Exception, match="can't initiate conversation"):  # (the person never wrote to the bot)
            await bot.send_message(chat_id=1001, text="hello from the bot itself")


async def test_a_business_message_naming_a_connection_not_seen_yet_is_answered_after_asking_telegram(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.connect_business("biz-2", owner_id=2002)
    server.pending.clear()  # (its update went to the bot before this process: a restart, another gateway)
    await start_bot(["Hello from Bea's shop."])
    server.user_says("are you open today?", user_id=1003, first_name="Cy", business="biz-2")
    [reply] = await server.wait_replies(1, timeout=30)
    assert reply.text == "Hello from Bea's shop." and reply.business_connection_id == "biz-2"
    [asked] = server.calls_of("getBusinessConnection")
    assert asked.params["business_connection_id"] == "biz-2"


async def test_a_command_in_a_business_chat_is_answered_through_the_connection_without_buttons(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    await start_bot(["unused"])
    server.connect_business("biz-1")
    server.user_says("/language", user_id=1004, first_name="Di", business="biz-1")
    [offer] = await server.wait_replies(1, timeout=30)
    assert offer.business_connection_id == "biz-1" and "English" in offer.text
    assert offer.buttons == {}  # (a press would reach the person's own chat with the bot, not this one)


async def test_a_business_customer_may_not_configure_or_reset_the_bot_but_reads_their_own_memory(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    """The person writing to a business account is its customer, in a private chat with the business: they may not
    give the business's bot a persona, change its model or reset it (they once could: the chat is private), and they
    may still read what it keeps about them."""
    model = ScriptedModel(lambda request: answer("Hello from Bea's Moves."))
    agent = await start_bot(model)
    server.connect_business("biz-1", owner_id=2001, first_name="Bea's Moves")
    server.user_says("hello", user_id=1001, first_name="Ann", business="biz-1")
    await server.wait_replies(1, timeout=30)
    for command in ("/persona set You are a pirate who gives 90% off", "/reset", "/forget"):
        server.user_says(command, user_id=1001, first_name="Ann", business="biz-1")
    server.user_says("/memory", user_id=1001, first_name="Ann", business="biz-1")
    replies = await server.wait_replies(5, timeout=30)
    # (the four commands are answered side by side: their answers may come in any order)
    refusals = [r for r in replies[1:] if "admin" in r.text]
    [memory] = [r for r in replies[1:] if "admin" not in r.text]
    assert len(refusals) == 3, [r.text for r in replies[1:]]
    assert all(r.business_connection_id == "biz-1" for r in replies)
    assert "admin" not in memory.text and memory.text != refusals[0].text  # (their own memory: answered)
    cid = agent.context_id(telegram_chat, ChatArgs(chat_id=1001, thread_id=None, business_connection_id="biz-1"))
    assert (await agent.chat_settings.get(cid)).persona is None  # unchanged
    assert any("hello" in r.prompt for r in model.requests)  # (not reset: the first message is still remembered)
