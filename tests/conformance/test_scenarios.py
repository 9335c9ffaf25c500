"""The conformance suite: one list of scenarios every platform passes, in one process, each against the
platform's fake through its real client (``drivers.py``). A scenario a platform cannot have is skipped with the
reason its driver declares (``Driver.not_applicable``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import ModelRequest, ScriptedModel
from core.schedules import ManualClock
from extensions.chat.i18n import say
from tests.approvals.support import POLICY, approval_model
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.slow_model import EndlessModel
from tests.mcp.support import logged_config

from .conftest import StartBot, applies, eventually
from .drivers import Driver

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def call(name: str, args: dict[str, object]) -> str:
    """The model's call of the action ``name``."""
    return f'<response><action_call name="{name}">{json.dumps(args)}</action_call></response>'


async def test_a_message_is_answered_and_streamed(driver: Driver, start_bot: StartBot) -> None:
    text = "Here is an answer long enough to be shown while it is written, a few words at a time, to the end."
    model = ScriptedModel([driver.answer(text)], chunk_size=6, delay=0.03)
    await start_bot(model)
    await driver.say("hello")
    await driver.wait(lambda: driver.replies() == [text])
    assert driver.streamed(), driver.versions()
    assert "hello" in model.requests[0].prompt


async def test_a_long_answer_is_split_into_messages_that_keep_every_word(driver: Driver, start_bot: StartBot) -> None:
    applies(driver, "split")
    paragraphs = [" ".join(f"w{p}x{n}" for n in range(400)) for p in range(4)]
    text = "\n\n".join(paragraphs)  # (about 9,000 characters: over every platform's limit)
    await start_bot(ScriptedModel([driver.answer(text)], chunk_size=400))
    await driver.say("tell me everything")
    await driver.wait(lambda: " ".join(driver.replies()).split() == text.split())
    assert len(driver.replies()) >= 3


async def test_in_a_group_a_mention_is_answered_and_chatter_is_not(driver: Driver, start_bot: StartBot) -> None:
    applies(driver, "group")
    model = ScriptedModel([driver.answer("Happy to help.")], repeat_last=True)
    await start_bot(model)
    await driver.say("lunch at noon, everyone?", where="group")
    await driver.say("can you help us plan it?", where="group", mention=True)
    await driver.wait(lambda: driver.replies("group") == ["Happy to help."])
    assert len(model.requests) == 1
    assert "can you help us plan it?" in model.requests[0].prompt


async def test_a_command_is_answered(driver: Driver, start_bot: StartBot) -> None:
    model = ScriptedModel([driver.answer("Noted: blue.")], repeat_last=True)
    agent = await start_bot(model)
    await driver.say("my favourite colour is blue")
    await driver.wait(lambda: driver.replies() == ["Noted: blue."])
    answer = await driver.command("reset")
    assert answer == say("reset_done") or (driver.name == "cli" and answer == "(conversation forgotten)")
    context, args = driver.conversation()
    state = await agent.load_state(context, args)
    assert "blue" not in " ".join(str(e) for e in state.working_memory.logs)


async def test_an_approval_is_asked_and_an_admin_s_press_runs_the_call(
    driver: Driver, start_bot: StartBot, tmp_path: Path
) -> None:
    applies(driver, "approval")
    applies(driver, "group")
    if type(driver).press_approve is Driver.press_approve:
        pytest.skip(f"{driver.name}: its driver cannot press an approval's buttons yet")
    calls = tmp_path / "calls.log"
    model = approval_model(driver.answer, title="printer", waiting=lambda result: "I asked an admin.")
    await start_bot(
        model,
        actions={"policy": POLICY},
        mcp={"servers": json.dumps([logged_config(calls)])},
        bot={"admin_users": driver.admin()},
    )
    await driver.say("please open a ticket", where="group", mention=True)
    await driver.wait(lambda: driver.approval_asked() and "I asked an admin." in driver.replies("group"))
    assert not calls.exists()  # (not run: it waits for the press)
    await driver.press_approve()
    await driver.wait(lambda: any(r.startswith("approved, ") for r in driver.replies("group")))
    assert calls.read_text().splitlines() == ["open_ticket printer"]
    await driver.wait(lambda: not driver.approval_asked())  # (the buttons give way to the decision)


async def test_stop_ends_the_answer_being_written(driver: Driver, start_bot: StartBot) -> None:
    model = EndlessModel(driver.output)
    await start_bot(model)
    await driver.say("tell me a long story")
    await driver.wait(lambda: model.writing.is_set() and bool(driver.replies()))
    answer = await driver.command("stop")
    assert answer == say("stop_done") or driver.name == "cli"  # (Ctrl-C at a terminal: the answer shows its mark)
    await driver.wait(lambda: model.cancelled)


async def test_a_picture_sent_is_shown_to_the_model(driver: Driver, start_bot: StartBot) -> None:
    applies(driver, "picture_in")
    model = ScriptedModel([driver.answer("A picture of noise.")], repeat_last=True, vision=True)
    await start_bot(model)
    await driver.send_picture(PNG, "what is this?")
    await driver.wait(lambda: driver.replies() == ["A picture of noise."])
    [image] = model.requests[0].images
    assert image.data == PNG and driver.files_fetched() == 1


async def test_a_picture_made_is_posted(driver: Driver, start_bot: StartBot) -> None:
    async with FakeOpenAIServer(api_key="sk-images") as openai:
        model = ScriptedModel([call("make_picture", {"prompt": "a red fox"}), driver.answer("Here is your fox.")])
        await start_bot(model, images={"base_url": openai.url, "api_key": "sk-images"})
        await driver.say("draw a fox")
        await driver.wait(lambda: "Here is your fox." in driver.replies() and bool(driver.pictures_posted()))
        assert driver.pictures_posted() == [openai.picture]


async def test_a_reminder_is_posted_when_it_is_due(driver: Driver, start_bot: StartBot) -> None:
    applies(driver, "reminder")
    clock = ManualClock()
    fired: list[ModelRequest] = []

    def at_the_reminder(request: ModelRequest) -> str:
        fired.append(request)
        return driver.answer("Time to stretch!")

    model = ScriptedModel(
        [
            call("set_reminder", {"text": "stretch", "in_seconds": 600}),
            driver.answer("I will remind you."),
            at_the_reminder,
        ],
        repeat_last=True,
    )
    await start_bot(model, clock=clock, bot={"schedules_poll": 0.05})
    await driver.say("remind me to stretch in ten minutes")
    await driver.wait(lambda: driver.replies() == ["I will remind you."])
    await clock.advance(601)
    await driver.wait(lambda: driver.replies()[-1:] == ["Time to stretch!"])
    assert len(fired) == 1


async def test_a_deleted_message_is_forgotten(driver: Driver, start_bot: StartBot) -> None:
    applies(driver, "deletion")
    model = ScriptedModel([driver.answer("Noted.")], repeat_last=True)
    agent = await start_bot(model)
    said = await driver.say("my locker code is 4711")
    await driver.wait(lambda: driver.replies() == ["Noted."])
    context, args = driver.conversation()

    async def remembered() -> str:
        state = await agent.load_state(context, args)
        return " ".join(str(e) for e in state.working_memory.logs)

    async def unloaded() -> bool:
        return agent.state_of(agent.context_id(context, args)) is None

    async def forgotten() -> bool:
        return "4711" not in await remembered()

    await eventually(unloaded)
    assert "4711" in await remembered()
    await driver.delete(said)
    await eventually(forgotten)  # (the event reaches the bot through its connection)
