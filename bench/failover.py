"""Redis failover: what confirming writes on a replica costs, and what a failover costs, with
``REDIS_MIN_REPLICAS=0`` and ``1``.

Each setting runs on a fresh topology on loopback (a primary with ``appendfsync everysec``, as deploy/ runs it,
a replica, three sentinels with ``down-after-milliseconds`` of ``--down-after``, 1000 by default), the fake
Telegram Bot API in this process, a ``bots gateway`` (long polling) and two queue workers as processes, all
finding Redis through the sentinels. The model answers after ``--model-ms``, naming the messages it answers and
when its run started.

- throughput: ``--chats`` chats each send ``--burst`` messages at once; messages/s from the first message to the
  last answer, and the ingest-to-run p50: from a message sent to Telegram (the fake) to the start of the run
  that answers it (the gateway's getUpdates, its store in Redis with the WAIT, the queue, the worker's claim);
- steady: the chats send a message every ``--interval`` seconds for ``--steady`` seconds; the ingest-to-run p50;
- one ingest alone: 1,000 stores of a message one after the other from this process (under another prefix, so
  no worker takes them), the p50 of one: the round trip a gateway waits for before it confirms an update;
- failover: the chats send a message every ``--interval`` seconds; the replica is cut off the primary for
  ``--partition`` seconds (as a network partition would: the writes of that time reach the primary only), then
  the primary is killed with ``kill -9``, the sentinels promote the replica, and the killed server is started
  again as a replica of the new one. Printed: the seconds from the kill to the first answer to a message sent
  after it, the messages never answered (lost: Telegram was told they were stored), and the messages answered
  twice.

Prints figures; asserts nothing. Run: .venv/bin/python bench/failover.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.testing import updates_of  # noqa: E402
from tests.fakes.telegram_server import FakeTelegramServer  # noqa: E402
from tests.fleet.sentinel import MASTER, SentinelTopology  # noqa: E402
from tests.fleet.server import free_port  # noqa: E402
from tests.fleet.worker_process import terminate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SELF = str(Path(__file__).resolve())
_INPUT = re.compile(r"<input [^>]*>(.*?)</input>", re.S)
_SAID = re.compile(r"c(\d+)m(\d+)")
_STARTED = re.compile(r"@(\d+\.\d+)")


# -- the worker process ----------------------------------------------------------------------------------


class Echo:
    """Answers ``echo: <the batch's messages> @<when the run started>`` after ``delay`` seconds."""

    name = "echo"
    model = ""
    vision = False
    last_usage = None

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def stream(self, request: Any) -> AsyncIterator[str]:
        started = time.time()
        found = updates_of(request.prompt)
        said = " | ".join(_INPUT.findall(found) if found else [])
        if self.delay:
            await asyncio.sleep(self.delay)
        yield f'<response><output type="telegram:message">echo: {said} @{started:.6f}</output></response>'


async def _work(args: argparse.Namespace) -> None:
    from core import create_agent
    from core.fleet import QueueConfig, QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
    from extensions.telegram import TelegramSettings, telegram_extension

    sentinels = tuple((h, int(p)) for h, p in (s.split(":") for s in args.sentinels.split(",")))
    backend = RedisBackend(
        QueueConfig(
            url="redis://127.0.0.1:6379/0",
            sentinels=sentinels,
            sentinel_master=MASTER,
            min_replicas=args.min_replicas,
            lease_seconds=args.lease,
            retry_seconds=30.0,
            max_attempts=20,
        )
    )
    settings = TelegramSettings(token=args.token, api_url=args.api_url, stream_replies=False, rate_limit=0)
    model = Echo(args.model_ms / 1000)
    agent = create_agent(
        model=model,
        extensions=[telegram_extension(settings, listen=False)],
        dispatcher=RedisDispatcher(backend),
        memory=RedisMemoryStore(backend),
    )
    try:
        await QueueWorker(agent, backend).run()
    finally:
        await backend.close()


# -- the bench -------------------------------------------------------------------------------------------


class Fleet:
    """One topology, the fake Telegram, a gateway and two workers, for one REDIS_MIN_REPLICAS."""

    def __init__(self, folder: Path, args: argparse.Namespace, min_replicas: int) -> None:
        self.folder = folder
        self.args = args
        self.min_replicas = min_replicas
        self.topology = SentinelTopology(folder / "redis", fsync="everysec", down_after_ms=args.down_after)
        self.telegram = FakeTelegramServer()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.said: dict[str, float] = {}

    async def start(self) -> None:
        await asyncio.to_thread(self.topology.start)
        await self.telegram.start()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "TELEGRAM_", "REDIS_", "LLM_"))}
        env.update(
            self.topology.env(min_replicas=self.min_replicas),
            TELEGRAM_TOKEN=self.telegram.token,
            TELEGRAM_API_URL=self.telegram.api_url,
            TELEGRAM_POLL_TIMEOUT="5",
            REDIS_LEASE_SECONDS=str(self.args.lease),
            REDIS_RETRY_SECONDS="30",
            LLM_PROVIDER="scripted",
            BOT_DATA_DIR=str(self.folder / "data"),
            HTTP_PORT=str(free_port()),
            LOG_LEVEL="WARNING",
        )
        self._spawn("gateway", [sys.executable, "-m", "bots.cli", "gateway"], env)
        for n in range(2):
            token = f"{self.telegram.token.split(':')[0]}:worker-{n}"
            self.telegram.tokens.add(token)
            args = [sys.executable, SELF, "--worker", "--sentinels", self.topology.sentinels, "--token", token]
            args += ["--api-url", self.telegram.api_url, "--min-replicas", str(self.min_replicas)]
            args += ["--lease", str(self.args.lease), "--model-ms", str(self.args.model_ms)]
            self._spawn(f"worker{n}", args, None)
        await self.telegram.wait_for(lambda: len(self.telegram.calls_of("getUpdates")) > 0, timeout=60)

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None) -> None:
        with (self.folder / f"{name}.log").open("wb") as log:
            self.procs.append(subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env))

    async def stop(self) -> None:
        await asyncio.to_thread(terminate, self.procs, 30)
        await self.telegram.close()
        self.topology.stop()

    def say(self, chat: int, seq: int) -> None:
        self.telegram.user_says(f"c{chat}m{seq}", user_id=7000 + chat)
        self.said[f"c{chat}m{seq}"] = time.time()

    def answers(self) -> dict[str, list[tuple[float, float]]]:
        """Each message answered: ``[(when the run answering it started, when the answer was posted)]``."""
        found: dict[str, list[tuple[float, float]]] = {}
        offset = time.time() - time.monotonic()
        for message in self.telegram.sent:
            started = _STARTED.search(message.text)
            for chat, seq in _SAID.findall(message.text):
                found.setdefault(f"c{chat}m{seq}", []).append(
                    (float(started[1]) if started else 0.0, message.posted_at + offset)
                )
        return found

    async def wait_answered(self, names: list[str], *, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answered = self.answers()
            if all(n in answered for n in names):
                return True
            await asyncio.sleep(0.02)
        return False


async def throughput(fleet: Fleet, args: argparse.Namespace, seq: int) -> tuple[float, float, int]:
    """A burst: every chat sends ``burst`` messages at once. ``(messages/s, ingest-to-run p50 seconds, next seq)``."""
    names = []
    start = time.time()
    for m in range(seq, seq + args.burst):
        for c in range(args.chats):
            fleet.say(c, m)
            names.append(f"c{c}m{m}")
    await fleet.wait_answered(names, timeout=120)
    answered = fleet.answers()
    last = max(answered[n][0][1] for n in names)
    runs = [answered[n][0][0] - fleet.said[n] for n in names]
    return len(names) / (last - start), statistics.median(runs), seq + args.burst


async def steady(fleet: Fleet, args: argparse.Namespace, seq: int) -> tuple[float, float, int]:
    """Every chat sends a message every ``interval`` seconds for ``steady`` seconds: ``(messages/s sent,
    ingest-to-run p50 seconds, next seq)``."""
    names = []
    start = time.monotonic()
    m = seq
    while time.monotonic() - start < args.steady:
        for c in range(args.chats):
            fleet.say(c, m)
            names.append(f"c{c}m{m}")
        m += 1
        await asyncio.sleep(args.interval)
    await fleet.wait_answered(names, timeout=120)
    answered = fleet.answers()
    runs = [answered[n][0][0] - fleet.said[n] for n in names]
    return len(names) / (time.monotonic() - start), statistics.median(runs), m


async def ingest_cost(fleet: Fleet, count: int = 1000) -> float:
    """p50 seconds of one ingest (the gateway's store of a message, with its WAIT), one after the other, under
    another prefix than the fleet's (no worker takes them)."""
    from core.fleet import QueueConfig, RedisBackend, RedisDispatcher

    sentinels = tuple(("127.0.0.1", port) for port in fleet.topology.sentinel_ports)
    config = QueueConfig(sentinels=sentinels, sentinel_master=MASTER, min_replicas=fleet.min_replicas, prefix="cost:")
    backend = RedisBackend(config)
    dispatcher = RedisDispatcher(backend)
    times = []
    try:
        for n in range(count):
            started = time.perf_counter()
            await dispatcher.ingest(f"cost:{n % 50}", json.dumps({"n": n}), dedupe_key=str(n))
            times.append(time.perf_counter() - started)
    finally:
        await backend.close()
    return statistics.median(times)


async def failover(fleet: Fleet, args: argparse.Namespace, seq: int) -> dict[str, Any]:
    """Messages flowing while the primary dies (after a partition); what it costs."""
    topology = fleet.topology
    names: list[str] = []
    killed_at = 0.0
    promoted = 0.0

    async def kill() -> None:
        nonlocal killed_at, promoted
        await asyncio.sleep(args.before)
        await asyncio.to_thread(topology.partition)
        await asyncio.sleep(args.partition)
        victim, at = await asyncio.to_thread(topology.kill_primary)
        killed_at = time.time() - (time.monotonic() - at)
        await asyncio.to_thread(topology.wait_promoted, victim)
        promoted = time.time() - killed_at
        await asyncio.to_thread(topology.rejoin, victim)

    killer = asyncio.create_task(kill())
    end = time.monotonic() + args.before + args.partition + args.after
    m = seq
    while time.monotonic() < end:
        for c in range(args.chats):
            fleet.say(c, m)
            names.append(f"c{c}m{m}")
        m += 1
        await asyncio.sleep(args.interval)
    await killer
    await fleet.wait_answered(names, timeout=120)
    answered = fleet.answers()
    after = [answered[n][0][1] for n in names if n in answered and fleet.said[n] > killed_at]
    if args.keep:
        lost = [round(fleet.said[n] - killed_at, 2) for n in names if n not in answered]
        chats = sorted({int(_SAID.match(n)[1]) for n in names if n not in answered})  # type: ignore[index]
        print(
            f"  lost, seconds from the kill: {sorted(lost)[:5]}..{sorted(lost)[-5:]}; chats {chats}; "
            f"pending at Telegram {len(fleet.telegram.pending)}"
        )
        if chats:
            await _dump(fleet, chats[:3])
            for chat in chats[:2]:
                mine = [n for n in names if n.startswith(f"c{chat}m")]
                print(
                    f"  chat {chat}: "
                    + " ".join(f"{n}{'+' if n in answered else '-'}@{fleet.said[n] - killed_at:.1f}" for n in mine)
                )
                calls = [
                    c
                    for c in fleet.telegram.calls_of("sendMessage")
                    if str(c.params.get("chat_id")) == str(7000 + chat)
                ]
                print("   posts: " + " | ".join(f"{c.status} {str(c.params.get('text'))[:40]}" for c in calls[-12:]))
    return {
        "sent": len(names),
        "lost": sum(1 for n in names if n not in answered),
        "twice": sum(1 for n in names if len(answered.get(n, ())) > 1),
        "first_answer": (min(after) - killed_at) if after else float("nan"),
        "promoted": promoted,
    }


async def _dump(fleet: Fleet, chats: list[int]) -> None:
    """What Redis holds for the conversations of ``chats`` (to see why they are not answered)."""
    from core.fleet import QueueConfig, RedisBackend

    sentinels = tuple(("127.0.0.1", port) for port in fleet.topology.sentinel_ports)
    backend = RedisBackend(QueueConfig(sentinels=sentinels, sentinel_master=MASTER))
    c = backend.client
    try:
        queue = await c.zrange("bots:queue", 0, -1, withscores=True)
        print(f"  queue {queue[:10]}")
        for chat in chats:
            base = f"bots:{{telegram:chat:{7000 + chat}}}:"
            print(
                f"  chat {chat}: meta {await c.hgetall(base + 'meta')} lease {await c.get(base + 'lease')} "
                f"pttl {await c.pttl(base + 'lease')} batch {await c.hget(base + 'batch', 'id')} "
                f"inbox {await c.llen(base + 'inbox')} active {await c.zscore('bots:active', f'telegram:chat:{7000 + chat}')}"
                f" now {time.time() * 1000:.0f}"
            )
    finally:
        await backend.close()


async def bench(args: argparse.Namespace) -> None:
    for min_replicas in args.min_replicas:
        rates, p50s, steady_p50s, firsts, promoted, lost, twice, sent = [], [], [], [], [], [], [], []
        costs: list[float] = []
        steady_rate = 0.0
        for _ in range(args.runs):
            folder = Path(tempfile.mkdtemp(prefix="bench-failover-"))
            fleet = Fleet(folder, args, min_replicas)
            try:
                await fleet.start()
                seq = 0
                _, _, seq = await throughput(fleet, args, seq)  # warm up
                for _ in range(args.bursts):
                    rate, p50, seq = await throughput(fleet, args, seq)
                    rates.append(rate)
                    p50s.append(p50)
                steady_rate, p50, seq = await steady(fleet, args, seq)
                steady_p50s.append(p50)
                costs.append(await ingest_cost(fleet))
                outcome = await failover(fleet, args, seq)
            finally:
                await fleet.stop()
                if not args.keep:
                    shutil.rmtree(folder, ignore_errors=True)
            firsts.append(outcome["first_answer"])
            promoted.append(outcome["promoted"])
            lost.append(outcome["lost"])
            twice.append(outcome["twice"])
            sent.append(outcome["sent"])
        print(
            f"REDIS_MIN_REPLICAS={min_replicas}: bursts of {args.chats * args.burst}: "
            f"{statistics.median(rates):.0f} messages/s ({_span(rates, '.0f')}), ingest-to-run p50 "
            f"{_span([x * 1000 for x in p50s], '.0f')} ms; at {steady_rate:.0f} messages/s: ingest-to-run p50 "
            f"{_span([x * 1000 for x in steady_p50s], '.1f')} ms; one ingest alone p50 "
            f"{_span([x * 1000 for x in costs], '.2f')} ms"
        )
        print(
            f"  failover: promoted {_span(promoted)} s after the kill, first answer to a message sent after the kill "
            f"{_span(firsts)} s after it; lost {_span(lost, '.0f')} and answered twice {_span(twice, '.0f')} of "
            f"{_span(sent, '.0f')} messages"
        )


def _span(values: list[float], spec: str = ".1f") -> str:
    low, high = min(values), max(values)
    return f"{low:{spec}}" if f"{low:{spec}}" == f"{high:{spec}}" else f"{low:{spec}}-{high:{spec}}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=1, help="fresh topologies per setting")
    p.add_argument("--min-replicas", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1])
    p.add_argument("--chats", type=int, default=50)
    p.add_argument("--burst", type=int, default=10, help="messages each chat sends at once (throughput)")
    p.add_argument("--bursts", type=int, default=3)
    p.add_argument("--interval", type=float, default=0.2, help="seconds between two messages of a chat (failover)")
    p.add_argument("--steady", type=float, default=4.0, help="seconds of steady traffic")
    p.add_argument("--before", type=float, default=1.0, help="seconds of traffic before the partition")
    p.add_argument("--partition", type=float, default=0.3, help="seconds the replica is cut off before the kill")
    p.add_argument("--after", type=float, default=6.0, help="seconds of traffic after the kill")
    p.add_argument("--down-after", type=int, default=1000, help="the sentinels' down-after-milliseconds")
    p.add_argument("--lease", type=float, default=5.0, help="REDIS_LEASE_SECONDS")
    p.add_argument("--model-ms", type=float, default=20.0, help="how long the model takes to answer")
    p.add_argument("--keep", action="store_true", help="keep the temporary folders (logs)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--sentinels", help=argparse.SUPPRESS)
    p.add_argument("--token", help=argparse.SUPPRESS)
    p.add_argument("--api-url", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        logging.basicConfig(level="WARNING", format="%(asctime)s %(process)d %(name)s %(message)s")
        args.min_replicas = args.min_replicas[0]
        asyncio.run(_work(args))
        return
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
