"""Matrix in a fleet: ``bots gateway`` and ``bots worker`` processes on a real redis-server and the fake homeserver.
The workers answer what the gateway stored, each message once; of two gateways one syncs (each /sync hands every
event to whoever asks) and the other stands by; a gateway killed holding events it could not store loses none of
them, and the events the next one syncs again are answered once (the dedupe of their event ids)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from bots.models import SCRIPTED_REPLY
from tests.bots_fleet import Process, env_for, start_fleet, stop_all
from tests.fakes.matrix_server import FakeHomeserver
from tests.fleet.server import RedisServer

from .conftest import ANN, BOB, syncing

TOKEN_TYPE = "io.daydreams.bots.sync"


def fleet_settings(homeserver: FakeHomeserver, redis_server: RedisServer) -> dict[str, str]:
    return {
        **homeserver.settings(),
        "REDIS_URL": redis_server.url,
        "REDIS_LEASE_SECONDS": "2",  # (a takeover within seconds; a lease not lost to a loaded machine's pauses)
        "MATRIX_SYNC_TIMEOUT": "1",
        "LLM_PROVIDER": "scripted",
    }


def answers_to(homeserver: FakeHomeserver, room: str) -> list[str]:
    """The event ids the bot's answers (not its notices) in ``room`` quote, in order."""
    return [
        s.content["m.relates_to"]["m.in_reply_to"]["event_id"]
        for s in homeserver.bot_messages(room)
        if s.content.get("msgtype") == "m.text" and "m.in_reply_to" in s.content.get("m.relates_to", {})
    ]


async def test_a_gateway_and_two_workers_answer_every_message_once(
    homeserver: FakeHomeserver,
    redis_server: RedisServer,
    processes: list[Process],
    tmp_path: Path,
    settings_env: None,
) -> None:
    people = [f"@p{n}:example.org" for n in range(5)]
    rooms = [homeserver.room(f"room {n}", {person: f"P{n}"}) for n, person in enumerate(people)]
    gateway, workers = await start_fleet(tmp_path, fleet_settings(homeserver, redis_server), processes, workers=2)
    await syncing(homeserver)
    asked = {room: [homeserver.say(room, person, "hello")] for room, person in zip(rooms, people, strict=True)}
    await homeserver.wait_for(lambda: all(len(answers_to(homeserver, r)) == 1 for r in rooms), "the first answers")
    for room, person in zip(rooms, people, strict=True):
        asked[room].append(homeserver.say(room, person, "and again"))
    await homeserver.wait_for(lambda: all(len(answers_to(homeserver, r)) == 2 for r in rooms), "the second answers")
    # in a group room, a reply to an answer a worker posted is addressed to the bot (the gateway asks who posted it)
    group = homeserver.room("Team", {ANN: "Ann", BOB: "Bob"})
    homeserver.say(group, ANN, "lunch at noon, Bob?")
    mention = homeserver.say(group, BOB, "are you there?", mention=True)
    await homeserver.wait_for(lambda: answers_to(homeserver, group) == [mention], "the answer to the mention")
    [answer] = [s.event["event_id"] for s in homeserver.bot_messages(group)][:1]
    reply = homeserver.say(group, ANN, "thanks!", reply_to=answer)
    await homeserver.wait_for(lambda: answers_to(homeserver, group) == [mention, reply], "the answer to the reply")
    await stop_all(gateway, *workers)
    for room in rooms:
        assert answers_to(homeserver, room) == asked[room]
        assert homeserver.shown(room) == [SCRIPTED_REPLY, SCRIPTED_REPLY]


async def test_two_gateways_ingest_each_event_exactly_once_across_a_takeover(
    homeserver: FakeHomeserver,
    redis_server: RedisServer,
    redis_client: Any,
    processes: list[Process],
    tmp_path: Path,
    settings_env: None,
) -> None:
    # one room per message: a burst in one room is one run with one answer, so each gets its own conversation
    rooms = [homeserver.room(f"room {n}", {ANN: "Ann"}) for n in range(4)]
    settings = fleet_settings(homeserver, redis_server)
    first, [worker] = await start_fleet(tmp_path, settings, processes, workers=1)
    second = Process("gateway", env_for(tmp_path, **settings), tmp_path)
    processes.append(second)
    await second.start()
    await second.wait_for("standing by")
    await syncing(homeserver)
    before = homeserver.account_data[TOKEN_TYPE]["next_batch"]
    asked = {rooms[0]: homeserver.say(rooms[0], ANN, "one")}
    await homeserver.wait_for(lambda: answers_to(homeserver, rooms[0]) == [asked[rooms[0]]], "the first answer")
    # the first gateway syncs the next events but cannot store them (Redis takes no writes), then dies
    await redis_client.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
    for room in rooms[1:3]:
        asked[room] = homeserver.say(room, ANN, "two")
    last = homeserver.position(asked[rooms[2]])
    await homeserver.wait_for(lambda: homeserver.served >= last, "the first gateway's sync of them")
    assert first.proc is not None
    first.proc.send_signal(signal.SIGKILL)
    await first.proc.wait()
    killed_at = len(homeserver.syncs)
    # ... and its token as a gateway killed between storing "one" and keeping the token would leave it
    homeserver.account_data[TOKEN_TYPE] = {"next_batch": before}
    await redis_client.execute_command("CLIENT", "UNPAUSE")
    await second.wait_for("gateway listening")
    await homeserver.wait_for(lambda: all(answers_to(homeserver, r) for r in rooms[:3]), "the answers after it")
    asked[rooms[3]] = homeserver.say(rooms[3], ANN, "three")
    await homeserver.wait_for(lambda: bool(answers_to(homeserver, rooms[3])), "the answer to the last message")
    await stop_all(second, worker)
    assert homeserver.syncs[killed_at] == before  # the second gateway synced "one" again ...
    for room in rooms:
        assert answers_to(homeserver, room) == [asked[room]]  # ... and each message answered once
