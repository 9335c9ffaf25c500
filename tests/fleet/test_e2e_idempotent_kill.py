"""A queue worker killed with ``kill -9`` while it answers, on Discord and Telegram: the real clients in worker
processes (``python -m tests.fleet.test_e2e_idempotent_kill``), the fake platforms and the listener in this
process, a real redis-server. The batch comes again to a second worker, which posts nothing that was posted:

- killed after posting its reply, while the model was still writing: the reply is not posted again and the
  model is not asked again (its answer is replayed from the ledger);
- killed in the middle of a streamed reply: the next attempt asks the model again and finishes the message
  already shown (edits it) instead of posting another one;
- killed after Discord stored a post but before the worker heard back (so before it could record it): the
  next attempt posts with the same nonce and Discord hands back the message it has (``enforce_nonce``).

A worker paused past its lease (SIGSTOP) in the middle of a streamed reply and woken up (SIGCONT) after
another took over does not touch the reply again.

The model decides from the message how it behaves in the first worker (``--hang``): ``after`` keeps writing
after its reply, ``inside`` stops in the middle of it, ``slow`` writes slowly; the second worker answers at
once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.testing import updates_of
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .server import RedisServer
from .test_e2e_idempotent import discord_settings, front, telegram_settings
from .worker_process import Spawned, kill, run, serve, stop_every, worker_arguments

_INPUT = re.compile(r"<input [^>]*>(.*?)</input>", re.S)

LEASE = 1.0
"""REDIS_LEASE_SECONDS of the workers: the second one takes over this long after the kill."""


# -- the worker process ----------------------------------------------------------------------------------


class Echo:
    """Answers ``echo: <message>`` as one output, streamed a few characters at a time, and appends the message
    to ``marks`` on every call. With ``hang``, a message naming a mode stops the answer there: ``inside`` the
    reply (after its first words) or ``after`` it (the reply is complete, the answer is not); ``slow`` takes
    a while for each few characters."""

    name = "echo"
    model = ""
    vision = False
    last_usage = None

    def __init__(self, output_type: str, marks: Path, *, hang: bool) -> None:
        self.output_type = output_type
        self.marks = marks
        self.hang = hang

    async def stream(self, request: Any) -> AsyncIterator[str]:
        found = updates_of(request.prompt)
        text = " | ".join(_INPUT.findall(found) if found else [])
        with self.marks.open("a") as f:
            f.write(json.dumps({"pid": os.getpid(), "text": text}) + "\n")
        body = said(text)
        yield f'<response><output type="{self.output_type}">'
        for i in range(0, len(body), 8):
            yield body[i : i + 8]
            await asyncio.sleep(0.2 if self.hang and text == "slow" else 0.005)
            if self.hang and text == "inside" and i >= 16:
                await asyncio.sleep(3600)  # killed here, in the middle of the reply
        yield "</output>"
        if self.hang and text == "after":
            await asyncio.sleep(3600)  # killed here: the reply was posted, the run is not over
        yield "</response>"


async def _work(args: argparse.Namespace) -> None:
    from core.fleet import QueueConfig, RedisBackend

    backend = RedisBackend(QueueConfig(url=args.url, lease_seconds=LEASE, retry_seconds=30.0))
    if args.platform == "discord":
        from extensions.discord import DiscordSettings, discord_extension

        extension = discord_extension(
            DiscordSettings(
                token="fake-token",
                api_url=args.api_url,
                stream_replies=args.stream,
                stream_interval=0.05,
            ),
            listen=False,
        )
        output_type = "discord:message"
    else:
        from extensions.telegram import TelegramSettings, telegram_extension

        extension = telegram_extension(
            TelegramSettings(token=args.token, api_url=args.api_url, stream_replies=args.stream, stream_interval=0.05),
            listen=False,
        )
        output_type = "telegram:message"
    await serve(backend, model=Echo(output_type, args.marks, hang=args.hang), extensions=[extension])


def main() -> None:
    p = worker_arguments()
    p.add_argument("--platform", choices=("discord", "telegram"), required=True)
    p.add_argument("--marks", type=Path, required=True)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--hang", action="store_true")
    run(_work, p, level="INFO")


# -- the tests -------------------------------------------------------------------------------------------


class Workers(Spawned):
    """Workers of ``module`` (this one), each with the ``common`` arguments and the model's marks."""

    module = "tests.fleet.test_e2e_idempotent_kill"

    def __init__(self, folder: Path, *common: str) -> None:
        super().__init__(folder)
        self.common = common
        self.marks = folder / "model.marks"

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", self.module, *self.common, "--marks", str(self.marks)]
        return self.spawn("worker", [*args, *extra])

    def check(self, proc: subprocess.Popen[bytes]) -> None:
        """Fail at once, with its log, if ``proc`` exited."""
        if proc.poll() is not None:
            index = self.procs.index(proc)
            log = (self.folder / f"worker-{index}.log").read_text()
            raise AssertionError(f"worker {index} exited with {proc.returncode}:\n{log[-3000:]}")

    def calls(self, proc: subprocess.Popen[bytes]) -> list[str]:
        """The messages the model was asked about in ``proc``."""
        if not self.marks.exists():
            return []
        lines = [json.loads(line) for line in self.marks.read_text().splitlines()]
        return sorted(line["text"] for line in lines if line["pid"] == proc.pid)


def said(message: str) -> str:
    """The reply ``Echo`` writes to ``message``."""
    return f"echo: {message}, with a few more words so that it streams"


async def ledgers(client: Any) -> dict[str, list[dict[str, Any]]]:
    """Every batch's ledger: its replies as stored, by context."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key in await client.keys("bots:{*}:ledger:*"):
        cid = key.split("{", 1)[1].split("}", 1)[0]
        fields = await client.hgetall(key)
        out[cid] = [json.loads(v) for k, v in sorted(fields.items()) if k.startswith("r")]
    return out


async def settled(client: Any) -> bool:
    """Every batch acknowledged (nothing taken and unanswered, no ledger left)."""
    return not await client.keys("bots:{*}:batch") and not await client.keys("bots:{*}:ledger:*")


class HoldingDiscord(FakeDiscord):
    """Holds the answer to the bot's first post in ``held_channel`` after storing the message, as if the
    worker died before it heard back."""

    def __init__(self) -> None:
        super().__init__()
        self.held_channel = 0
        self.holding = False
        self.release = asyncio.Event()

    async def _create_message(self, channel_id: int, body: Any) -> Any:
        response = await super()._create_message(channel_id, body)
        if channel_id == self.held_channel and not self.release.is_set():
            self.holding = True
            self._notify()
            await self.release.wait()
        return response


@pytest.fixture
async def discord() -> AsyncIterator[HoldingDiscord]:
    async with HoldingDiscord() as fake:
        try:
            yield fake
        finally:
            fake.release.set()
    assert fake.unhandled == [], fake.unhandled


@pytest.fixture
def workers() -> Iterator[list[Workers]]:
    made: list[Workers] = []
    yield made
    stop_every(made)


async def test_discord_a_killed_worker_s_replies_are_not_posted_again(
    redis_server: RedisServer, discord: HoldingDiscord, client: Any, tmp_path: Path, workers: list[Workers]
) -> None:
    procs = Workers(
        tmp_path, "--platform", "discord", "--url", redis_server.url, "--api-url", discord.api_url, "--stream"
    )
    workers.append(procs)
    people = {mode: discord.user(mode) for mode in ("after", "inside", "held")}
    dms = {mode: discord.dm_channel(user) for mode, user in people.items()}
    discord.held_channel = dms["held"]
    victim = procs.start("--hang")
    async with front(redis_server, discord_extension_for(discord)):
        for mode, dm in dms.items():
            await discord.say(dm, mode, author=people[mode])

        async def at_the_kill_points() -> bool:
            procs.check(victim)
            stored = await ledgers(client)
            after = stored.get(f"discord:channel:{dms['after']}", [])
            inside = stored.get(f"discord:channel:{dms['inside']}", [])
            return (
                any(r["done"] for r in after)  # the reply was posted and recorded as such
                and any(r["ids"] for r in inside)  # the streamed reply's message was posted and recorded
                and discord.holding  # Discord stored the post, the worker has not heard back
            )

        await wait_until(at_the_kill_points, timeout=30, what="the victim at its three kill points")
        killed = kill(victim)
        [delivered] = discord.posted_in(dms["after"])
        shown = discord.versions_of(delivered)
        discord.release.set()
        survivor = procs.start()
        await wait_until(lambda: settled(client), timeout=30, what="the survivor's answers")
        recovery = time.monotonic() - killed
        await discord.say(dms["after"], "and then", author=people["after"])  # the conversation goes on
        await discord.wait_until(
            lambda: [m["content"] for m in discord.posted_in(dms["after"])][1:] == [said("and then")]
        )
    procs.stop_all()
    for mode, dm in dms.items():
        expected = [said(mode)] + ([said("and then")] if mode == "after" else [])
        assert [m["content"] for m in discord.visible_in(dm)] == expected, mode
        assert len(discord.posted_in(dm)) == len(expected), mode  # not one message posted twice
    assert discord.versions_of(delivered) == shown  # the survivor left the delivered reply alone
    inside = discord.posted_in(dms["inside"])[0]
    assert len(discord.versions_of(inside)) >= 3  # shown by the victim, finished by the survivor
    held = [r.body for r in discord.requests if r.method == "POST" and r.path == f"/channels/{dms['held']}/messages"]
    assert len(held) == 2 and held[0]["nonce"] == held[1]["nonce"]  # posted again, shown once: the nonce
    # the model was asked again only where the killed worker had not completed its answer
    assert procs.calls(victim) == ["after", "held", "inside"]
    assert procs.calls(survivor) == ["and then", "held", "inside"]
    print(f"\nkill -9 at three points of a reply: answered without repeats {recovery:.2f}s after (lease {LEASE}s)")


def discord_extension_for(fake: FakeDiscord) -> Any:
    from extensions.discord import discord_extension

    return discord_extension(discord_settings(fake))


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "posted"])
async def test_telegram_a_killed_worker_s_replies_are_not_posted_again(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    client: Any,
    tmp_path: Path,
    workers: list[Workers],
    stream: bool,
) -> None:
    from extensions.telegram import telegram_extension

    common = ["--platform", "telegram", "--url", redis_server.url, "--api-url", telegram.api_url]
    procs = Workers(tmp_path, *common, "--token", telegram.token, *(["--stream"] if stream else []))
    workers.append(procs)
    modes = ("after", "inside") if stream else ("after",)
    chats = {mode: 6000 + i for i, mode in enumerate(modes)}
    victim = procs.start("--hang")
    async with front(redis_server, telegram_extension(telegram_settings(telegram))):
        for mode, chat in chats.items():
            telegram.user_says(mode, user_id=chat)

        async def at_the_kill_points() -> bool:
            procs.check(victim)
            stored = await ledgers(client)
            return any(r["done"] for r in stored.get(f"telegram:chat:{chats['after']}", [])) and (
                not stream or any(r["ids"] for r in stored.get(f"telegram:chat:{chats['inside']}", []))
            )

        await wait_until(at_the_kill_points, timeout=30, what="the victim at its kill points")
        killed = kill(victim)
        posts = len(telegram.calls_of("sendMessage"))
        [delivered] = [m for m in telegram.sent if m.chat_id == chats["after"]]
        shown = delivered.versions
        survivor = procs.start()
        await wait_until(lambda: settled(client), timeout=30, what="the survivor's answers")
        recovery = time.monotonic() - killed
        assert len(telegram.calls_of("sendMessage")) == posts  # nothing posted again, not even tried
        assert delivered.versions == shown  # the delivered reply left alone
        telegram.user_says("and then", user_id=chats["after"])
        await telegram.wait_for(
            lambda: [m.text for m in telegram.sent if m.chat_id == chats["after"]][1:] == [said("and then")]
        )
    procs.stop_all()
    for mode, chat in chats.items():
        expected = [said(mode)] + ([said("and then")] if mode == "after" else [])
        sent = [m for m in telegram.sent if m.chat_id == chat]
        assert [m.text for m in sent] == expected, mode  # each posted once, none deleted
        assert not any(m.deleted for m in sent)
    assert procs.calls(victim) == sorted(modes)
    assert procs.calls(survivor) == ["and then", *(["inside"] if stream else [])]
    print(f"\nkill -9 after a reply was posted: answered without repeats {recovery:.2f}s after (lease {LEASE}s)")


async def test_discord_a_worker_paused_past_its_lease_leaves_a_streamed_reply_alone(
    redis_server: RedisServer, discord: HoldingDiscord, client: Any, tmp_path: Path, workers: list[Workers]
) -> None:
    procs = Workers(
        tmp_path, "--platform", "discord", "--url", redis_server.url, "--api-url", discord.api_url, "--stream"
    )
    workers.append(procs)
    user = discord.user("slow")
    dm = discord.dm_channel(user)
    victim = procs.start("--hang")
    async with front(redis_server, discord_extension_for(discord)):
        await discord.say(dm, "slow", author=user)

        async def shown_and_recorded() -> bool:
            procs.check(victim)
            return any(r["ids"] for r in (await ledgers(client)).get(f"discord:channel:{dm}", []))

        await wait_until(shown_and_recorded, timeout=30, what="the victim's first words")
        victim.send_signal(signal.SIGSTOP)  # paused in the middle of the reply, past its lease
        procs.start()
        await wait_until(lambda: settled(client), timeout=30, what="the survivor's answer")
        [reply] = discord.posted_in(dm)
        finished = discord.versions_of(reply)
        assert finished[-1] == said("slow")
        victim.send_signal(signal.SIGCONT)  # its model goes on writing; its lease is gone
        log = tmp_path / "worker-0.log"
        await wait_until(lambda: "lost: cancelling its run" in log.read_text(), timeout=30, what="the victim's stop")
    procs.stop_all()
    assert discord.posted_in(dm) == [reply] and discord.versions_of(reply) == finished  # not touched again


if __name__ == "__main__":
    main()
