"""The operator's test of the Telegram fleet: ``bots gateway`` and two queue workers as real processes on one
redis-server, the fake Bot API in this process, 50 private chats writing 10 messages each; one worker is
killed with ``kill -9`` while it posts answers, and the gateway is killed with ``kill -9`` and started again.

What the users see is checked: every message answered (0 lost), no reply to older messages after a reply
to newer ones in the same chat (0 out of order), and a message answered twice only for a post the killed
worker had in flight (sent, not yet answered by Telegram): with ``TELEGRAM_UNCERTAIN_REPLIES=resend`` at
most that many, with ``skip`` none (and then at most that many missing instead). The workers collect, and once
steer (``BOT_BUSY``'s default: what a chat sends while its batch runs joins it, and a batch the killed worker held is
run again in the parts it was joined in).

The model is scaled down (an answer in about 50 ms, streamed in a few pieces); the fake Bot API answers a
post 20 ms after making the message, so a kill finds posts in flight. Each worker uses its own token of the
same bot, so the fake can tell which posts the killed one had in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.testing import updates_of
from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import wait_until
from .deployment import deployment_env
from .server import RedisServer, free_port
from .worker_process import Spawned, kill, run, serve, worker_arguments

_INPUT = re.compile(r"<input [^>]*>(.*?)</input>", re.S)
_SAID = re.compile(r"c(\d+)m(\d+)")

CHATS = 50
MESSAGES = 10
LEASE = 3.0
"""REDIS_LEASE_SECONDS: a killed worker's conversations (and the gateway's lock) are taken over this fast."""
MODEL_SECONDS = 0.05
"""How long the model takes for an answer."""


# -- the worker process ----------------------------------------------------------------------------------


class Echo:
    """Answers ``echo: <the messages of the batch>`` as one streamed output, in about ``MODEL_SECONDS``."""

    name = "echo"
    model = ""
    vision = False
    last_usage = None

    async def stream(self, request: Any) -> AsyncIterator[str]:
        found = updates_of(request.prompt)
        text = " | ".join(_INPUT.findall(found) if found else [])
        body = f"echo: {text}"
        yield '<response><output type="telegram:message">'
        for i in range(0, len(body), max(1, len(body) // 4)):
            await asyncio.sleep(MODEL_SECONDS / 5)
            yield body[i : i + max(1, len(body) // 4)]
        await asyncio.sleep(MODEL_SECONDS / 5)
        yield "</output></response>"


async def _work(args: argparse.Namespace) -> None:
    from core.fleet import QueueConfig, RedisBackend
    from extensions.chat import Uncertain
    from extensions.telegram import TelegramSettings, telegram_extension

    backend = RedisBackend(
        QueueConfig(url=args.url, lease_seconds=LEASE, retry_seconds=30.0, max_attempts=20, busy=args.busy)
    )
    settings = TelegramSettings(
        token=args.token,
        api_url=args.api_url,
        stream_replies=args.stream,
        stream_interval=0.05,
        rate_limit=0,
        uncertain_replies=Uncertain(args.uncertain),
    )
    await serve(backend, model=Echo(), extensions=[telegram_extension(settings, listen=False)])


def main() -> None:
    p = worker_arguments()
    p.add_argument("--uncertain", default="resend")
    p.add_argument("--stream", action="store_true")
    p.add_argument("--busy", default="collect")
    run(_work, p, level="WARNING")


# -- the test --------------------------------------------------------------------------------------------


class Fleet(Spawned):
    """The gateway and worker processes of one test."""

    def __init__(self, folder: Path, redis_server: RedisServer, telegram: FakeTelegramServer) -> None:
        super().__init__(folder)
        self.redis_server = redis_server
        self.telegram = telegram

    def worker(self, token: str, *extra: str) -> subprocess.Popen[bytes]:
        self.telegram.tokens.add(token)
        args = [sys.executable, "-m", "tests.fleet.test_e2e_fleet", "--url", self.redis_server.url]
        return self.spawn("worker", [*args, "--api-url", self.telegram.api_url, "--token", token, *extra])

    def gateway(self) -> subprocess.Popen[bytes]:
        env = deployment_env(
            self.redis_server,
            self.folder,
            telegram=self.telegram,
            TELEGRAM_POLL_TIMEOUT="5",
            REDIS_LEASE_SECONDS=str(LEASE),
            LLM_PROVIDER="scripted",
            HTTP_PORT=str(free_port()),
            LOG_LEVEL="WARNING",
        )
        return self.spawn("gateway", [sys.executable, "-m", "bots.cli", "gateway"], env=env)

    def check(self) -> None:
        """Fail at once, with its log, if a process that should run has exited."""
        for i, proc in enumerate(self.procs):
            if proc.poll() is not None and proc.returncode != -signal.SIGKILL:
                logs = sorted(self.folder.glob(f"*-{i}.log"))
                raise AssertionError(f"process {i} exited with {proc.returncode}:\n{logs[0].read_text()[-3000:]}")


@dataclass(kw_only=True)
class Outcome:
    """What the users saw."""

    lost: list[str]
    twice: list[str]
    again: int
    """Posts that answered a message an earlier post had answered."""
    fragments: int
    """Posts left showing only the first words of an answer (a streamed reply's first post, sent again)."""
    out_of_order: list[int]
    in_flight: int
    victims: int = 0
    """Of ``again`` and ``fragments``, the posts of the victim or answering again what one of its posts answered:
    a post it made whose record it could not write (cut off, killed) is made again by the worker that takes its
    conversation over."""

    def __str__(self) -> str:
        return (
            f"{CHATS * MESSAGES} messages: {len(self.lost)} lost, {len(self.twice)} answered twice "
            f"({self.again} posts), {self.fragments} stray first words, {len(self.out_of_order)} chats out of "
            f"order; {self.in_flight} posts in flight at the kill"
        )


_COMPLETE = re.compile(r"echo: c\d+m\d+( \| c\d+m\d+)*")


def outcome(telegram: FakeTelegramServer, victim_token: str, killed_at: float, at_kill: int = 0) -> Outcome:
    answered: dict[str, int] = {}
    posters: dict[str, set[str]] = {}
    out_of_order = []
    again = victims = 0
    for chat in range(CHATS):
        mine = (m for m in telegram.sent if m.chat_id == 7000 + chat and not m.deleted)
        replies = sorted(mine, key=lambda m: m.message_id)
        newest = -1
        for reply in replies:
            said = [int(m) for _, m in _SAID.findall(reply.text)]
            repeated = [f"c{chat}m{m}" for m in said if f"c{chat}m{m}" in answered]
            again += bool(repeated)
            tokens = {reply.token}.union(*(posters[m] for m in repeated))
            victims += bool(repeated) and bool(victim_token) and victim_token in tokens
            for m in said:
                posters.setdefault(f"c{chat}m{m}", set()).add(reply.token)
            # the order of first answers: an answer given again (a batch run again, counted in ``again``) comes
            # after later ones by nature
            first = [m for m in said if f"c{chat}m{m}" not in answered]
            for m in said:
                answered[f"c{chat}m{m}"] = answered.get(f"c{chat}m{m}", 0) + 1
            if first and max(first) < newest:
                out_of_order.append(chat)
            newest = max([newest, *first])
    everything = [f"c{c}m{m}" for c in range(CHATS) for m in range(MESSAGES)]
    after = [c for c in telegram.calls_of("sendMessage") if c.token == victim_token and c.at >= killed_at]
    stray = [
        m
        for m in telegram.sent
        if 7000 <= m.chat_id < 7000 + CHATS and not m.deleted and not _COMPLETE.fullmatch(m.text)
    ]
    fragments = len(stray)
    victims += sum(1 for m in stray if victim_token and m.token == victim_token)
    return Outcome(
        lost=[m for m in everything if m not in answered],
        twice=[m for m, n in answered.items() if n > 1],
        again=again,
        fragments=fragments,
        out_of_order=sorted(set(out_of_order)),
        in_flight=at_kill + len(after),
        victims=victims,
    )


@pytest.fixture
def telegram(telegram: FakeTelegramServer) -> FakeTelegramServer:
    """The fake Bot API, answering a post 20 ms after making the message."""
    telegram.post_delay = 0.02
    return telegram


@pytest.fixture
def fleets() -> Iterator[list[Fleet]]:
    made: list[Fleet] = []
    yield made
    for fleet in made:
        fleet.stop_all()


@pytest.mark.timeout(300)  # about 30 s alone; a 2-core machine shared with other test runs takes longer
@pytest.mark.parametrize(
    ("uncertain", "busy"),
    [
        pytest.param("resend", "collect", id="resend"),
        pytest.param("skip", "collect", id="skip"),
        pytest.param("resend", "steer", id="resend-steer"),
    ],
)
async def test_a_fleet_with_a_worker_and_the_gateway_killed_answers_every_message_once_and_in_order(
    redis_server: RedisServer,
    telegram: FakeTelegramServer,
    client: Any,
    tmp_path: Path,
    fleets: list[Fleet],
    uncertain: str,
    busy: str,
) -> None:
    fleet = Fleet(tmp_path, redis_server, telegram)
    fleets.append(fleet)
    victim_token, other_token = (f"{telegram.token.split(':')[0]}:worker-{n}" for n in ("a", "b"))
    gateway = fleet.gateway()
    victim = fleet.worker(victim_token, "--uncertain", uncertain, "--stream", "--busy", busy)
    fleet.worker(other_token, "--uncertain", uncertain, "--stream", "--busy", busy)
    await telegram.wait_for(lambda: len(telegram.calls_of("getUpdates")) > 0, timeout=60)
    killed_at, at_kill = float("inf"), 0
    for m in range(MESSAGES):
        fleet.check()
        for c in range(CHATS):
            telegram.user_says(f"c{c}m{m}", user_id=7000 + c)
        await asyncio.sleep(0.15)
        if m == 3:  # the victim is killed in the middle of posting answers
            await telegram.wait_for(
                lambda: any(c.token == victim_token and not c.done for c in telegram.calls_of("sendMessage")),
                timeout=30,
            )
            killed_at = kill(victim)
            at_kill = await posts_in_doubt(client)
        if m == 5:  # the gateway too, and started again
            kill(gateway)
            await asyncio.sleep(0.5)
            gateway = fleet.gateway()

    async def done() -> bool:
        fleet.check()
        if uncertain == "resend" and outcome(telegram, victim_token, killed_at, at_kill).lost:
            return False
        return not telegram.pending and await _settled(client)

    started = time.monotonic()
    try:
        await wait_until(done, timeout=150, what="every message answered and every batch acknowledged")
    except AssertionError:
        seen = outcome(telegram, victim_token, killed_at, at_kill)
        left = {k: await client.llen(k) for k in await client.keys("bots:{*}:inbox")}
        dead = await client.lrange("bots:dead", 0, -1)
        chats = sorted({int(m[1:].split("m")[0]) for m in seen.lost})[:3]
        shown = [(m.chat_id, m.message_id, m.versions, m.deleted) for m in telegram.sent if m.chat_id - 7000 in chats]
        raise AssertionError(
            f"{seen}; lost {seen.lost[:20]}; inboxes {left}; pending {len(telegram.pending)}; dead {dead}; {shown}"
        ) from None
    seen = outcome(telegram, victim_token, killed_at, at_kill)
    resolved = uncertain_posts(tmp_path)
    given_up = leases_given_up(tmp_path)
    print(
        f"\n{uncertain}: {seen}; {resolved} uncertain posts resolved; {given_up} leases given up by live workers "
        f"(all answered {time.monotonic() - started:.1f}s after the last message)"
    )
    assert seen.out_of_order == []
    if uncertain == "resend":
        assert seen.lost == []
        # a post is answered twice only if it was in flight when its worker died, or when a live worker gave its
        # lease up (starved of CPU past REDIS_LEASE_SECONDS: at most one post in flight per conversation); a part of
        # a steered batch run again is recognised from the reply ledger, not answered again (issue 50)
        strays = [
            m.versions for m in telegram.sent if 7000 <= m.chat_id < 7000 + CHATS and not _COMPLETE.fullmatch(m.text)
        ]
        parts = parts_run_again(tmp_path)  # (0 unless the workers steer)
        assert seen.again + seen.fragments <= seen.in_flight + given_up, (seen, given_up, parts, strays[:8])
    else:
        assert seen.twice == []
        assert lost_replies(seen.lost) <= resolved, seen  # only a post taken as shown that never got there


def uncertain_posts(folder: Path) -> int:
    """Posts the workers found uncertain (sent by a worker that died before it heard back), from their logs."""
    return sum(log.read_text().count("died before it heard back") for log in folder.glob("worker-*.log"))


def leases_given_up(folder: Path) -> int:
    """Leases live workers lost or gave up (each may leave one post of its conversation uncertain)."""
    return sum(log.read_text().count("lost: cancelling its run") for log in folder.glob("worker-*.log"))


_HANDED_OVER = re.compile(r"lease on (\S+) lost: cancelling its run|(\S+): its worker stopped renewing the lease")


def handed_over(folder: Path) -> set[str]:
    """The conversations (``telegram:chat:7031``) whose lease a worker lost or gave up, so that another took them."""
    found = (m for log in folder.glob("worker-*.log") for m in _HANDED_OVER.finditer(log.read_text()))
    return {m[1] or m[2] for m in found}


_PARTS = re.compile(r"is run again in (\d+) parts")


def parts_run_again(folder: Path) -> int:
    """Parts of steered batches run again after the first of each (``Drainer``): each may answer again messages that
    one step of the model had read with the part before it, never lose them."""
    return sum(int(n) - 1 for log in folder.glob("worker-*.log") for n in _PARTS.findall(log.read_text()))


def lost_replies(lost: list[str]) -> int:
    """How many replies the lost messages make at most: consecutive messages of a chat count as one."""
    said = sorted((int(c), int(m)) for c, m in (_SAID.match(x).groups() for x in lost))  # type: ignore[union-attr]
    return sum(1 for i, (c, m) in enumerate(said) if i == 0 or said[i - 1] != (c, m - 1))


async def posts_in_doubt(client: Any) -> int:
    """Posts in flight as the ledgers record them: intent written, id not (read right after the kill, before
    another worker takes the conversations over). The fake cannot tell: a post it answered may not have been
    read by the worker before it died."""
    doubts = set()
    for key in await client.keys("bots:{*}:ledger:*"):
        for name, value in (await client.hgetall(key)).items():
            if not name.startswith("r"):
                continue
            slot = json.loads(value)
            if slot.get("p") is not None and slot["p"] >= len(slot["ids"]) and not slot["done"]:
                doubts.add((key, slot["p"], slot.get("pt"), tuple(slot["ids"])))
    return len(doubts)


async def _settled(client: Any) -> bool:
    return not await client.keys("bots:{*}:batch") and not await client.keys("bots:{*}:inbox")


if __name__ == "__main__":
    main()
