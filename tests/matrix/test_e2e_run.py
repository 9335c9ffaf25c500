"""``bots run`` with ``MATRIX_*`` set, as a process, on the fake homeserver: matrix-nio's real client syncs, the bot
answers in a private room, in a thread, when mentioned in a group room, serves a command and refuses an encrypted
room with one message."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from bots.models import SCRIPTED_REPLY
from tests.bots_fleet import DEADLINE, env_for, stop_all
from tests.fakes.matrix_server import FakeHomeserver

from .conftest import ANN, BOB, StartRun


async def test_a_message_in_a_private_room_is_answered_quoting_it(
    homeserver: FakeHomeserver, start_run: StartRun
) -> None:
    room = homeserver.room("Ann and the bot", {ANN: "Ann"})
    bot = await start_run()
    asked = homeserver.say(room, ANN, "hello bot")
    await homeserver.wait_for(lambda: SCRIPTED_REPLY in homeserver.shown(room), "the answer")
    [first, *_] = [s for s in homeserver.bot_messages(room) if s.content.get("msgtype") == "m.text"]
    assert first.content["m.relates_to"] == {"m.in_reply_to": {"event_id": asked}}
    assert homeserver.token not in "".join(str(line) for line in bot.lines)
    await stop_all(bot)
    assert homeserver.token not in "".join(str(line) for line in bot.lines)


async def test_an_invite_is_accepted_and_the_room_answered(homeserver: FakeHomeserver, start_run: StartRun) -> None:
    bot = await start_run()
    room = homeserver.room("Ann invites the bot", {ANN: "Ann"}, joined=False)
    await homeserver.wait_for(lambda: homeserver.rooms[room].bot_joined, "the bot's join")
    homeserver.say(room, ANN, "welcome!")
    await homeserver.wait_for(lambda: homeserver.shown(room) == [SCRIPTED_REPLY], "the answer")
    await stop_all(bot)
    assert any(f"joined {room}" in str(line.get("message")) for line in bot.lines)


async def test_a_thread_is_its_own_conversation_and_is_answered_in_it(
    homeserver: FakeHomeserver, start_run: StartRun
) -> None:
    room = homeserver.room("Ann and the bot", {ANN: "Ann"})
    bot = await start_run()
    root = homeserver.say(room, ANN, "a topic")
    await homeserver.wait_for(lambda: SCRIPTED_REPLY in homeserver.shown(room), "the room's answer")
    homeserver.say(room, ANN, "more on it", thread=root)
    await homeserver.wait_for(lambda: SCRIPTED_REPLY in homeserver.shown(room, thread=root), "the thread's answer")
    assert homeserver.shown(room) == [SCRIPTED_REPLY]  # (the thread's answer is in the thread only)
    await stop_all(bot)
    said = [line.get("message", "") for line in bot.lines]
    assert any(f"{room}/{root}" in s for s in said), said


async def test_in_a_group_room_only_a_mention_or_a_command_is_answered(
    homeserver: FakeHomeserver, start_run: StartRun
) -> None:
    room = homeserver.room("Team", {ANN: "Ann", BOB: "Bob"})
    bot = await start_run()
    homeserver.say(room, ANN, "just chatting with Bob")
    homeserver.say(room, BOB, "what time is it?", mention=True)
    await homeserver.wait_for(lambda: SCRIPTED_REPLY in homeserver.shown(room), "the answer to the mention")
    homeserver.say(room, ANN, "!help")
    homeserver.say(room, BOB, "Daydream, are you there?")  # (its display name, as a word, is a mention too)
    await homeserver.wait_for(lambda: any("!stop" in t for t in homeserver.shown(room)), "the help")
    await homeserver.wait_for(lambda: homeserver.shown(room, notices=False) == [SCRIPTED_REPLY] * 2, "the answers")
    await stop_all(bot)
    assert homeserver.shown(room, notices=False) == [SCRIPTED_REPLY] * 2  # (the first message was left)


async def test_an_encrypted_room_is_refused_with_one_message_and_a_log_line_naming_the_extra(
    homeserver: FakeHomeserver, start_run: StartRun
) -> None:
    secret_room = homeserver.room("Secret", {ANN: "Ann"}, encrypted=True)
    open_room = homeserver.room("Open", {ANN: "Ann"})
    bot = await start_run()
    await bot.wait_for("matrix-nio[e2e]")
    homeserver.say(secret_room, ANN, "can you read this?")
    homeserver.say(open_room, ANN, "and this?")
    await homeserver.wait_for(lambda: SCRIPTED_REPLY in homeserver.shown(open_room), "the open room's answer")
    homeserver.say(secret_room, ANN, "hello?")
    homeserver.say(open_room, ANN, "again")
    await homeserver.wait_for(lambda: homeserver.shown(open_room).count(SCRIPTED_REPLY) == 2, "the second answer")
    [refusal] = homeserver.shown(secret_room)
    assert "encrypted" in refusal
    await stop_all(bot)


async def test_a_token_the_homeserver_stops_accepting_stops_the_bot_with_one_clear_line(
    homeserver: FakeHomeserver, start_run: StartRun
) -> None:
    old = homeserver.token
    bot = await start_run()
    homeserver.token = "syt_" + "replaced" * 4  # (the bot's session was logged out)
    line = await bot.wait_for("stopped accepting MATRIX_ACCESS_TOKEN")
    assert bot.proc is not None
    async with asyncio.timeout(DEADLINE):
        code = await bot.proc.wait()
    said = " ".join(str(line.get("message", "")) for line in bot.lines)
    assert code == 2, said
    assert "set MATRIX_ACCESS_TOKEN to the bot account's current token" in line["message"] and old not in said


async def test_bots_config_shows_the_access_token_masked(homeserver: FakeHomeserver, tmp_path: Path) -> None:
    env = env_for(tmp_path, **homeserver.settings())
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bots.cli",
        "config",
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(DEADLINE):
        out, _ = await done.communicate()
    shown = out.decode()
    assert "MATRIX_ACCESS_TOKEN" in shown and "********" in shown, shown
    assert homeserver.token not in shown
