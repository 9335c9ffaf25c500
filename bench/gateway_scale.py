"""Ingest at scale: messages stored per second with 1, 2 and 4 ``bots gateway`` processes dividing the
fake Discord's shards, and how long a gateway killed with ``kill -9`` takes to have its shards back.

Each run: a fresh redis-server (``appendfsync everysec``, as deploy/ runs it), the fake Discord on 127.0.0.1
with ``--shards`` shards (a server with ``--channels`` channels on each), N gateway processes (no workers), all
shards connected; then the fake sends ``--messages`` messages as fast as it can over the shard connections and
the time until every one is stored in its conversation's Redis inbox is measured. The fake runs in this
process and Redis, the fake and the gateways share the machine's cores: on 2 cores the ratio is bounded by
them, not by the gateways. Takeover: two gateways, one killed; the time from the kill until each of its shards
is connected again by the other (the lease is ``--lease`` seconds). Prints figures; asserts nothing.

Run: .venv/bin/python bench/gateway_scale.py [--messages 3000] [--shards 8] [--gateways 1,2,4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# bench/core.py is named like the project's core package: keep bench/ off the import path, and put the
# repository root (for tests.fakes) on it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio  # noqa: E402

from tests.fakes.discord_server import FakeDiscord  # noqa: E402
from tests.fleet.server import RedisServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


async def _wait(predicate: Any, *, timeout: float, what: str, every: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(every)


async def _stored(client: Any) -> int:
    keys = await client.keys("bots:{discord:*}:inbox")
    if not keys:
        return 0
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.llen(key)
        return sum(await pipe.execute())


class Deployment:
    """The fake Discord, a Redis and gateway processes."""

    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        self.args = args
        self.folder = folder
        self.fake = FakeDiscord()
        self.fake.recommended_shards = args.shards
        self.fake.max_concurrency = args.shards  # a large bot's concurrency: every shard its own bucket
        self.channels = [
            self.fake.text_channel(self.fake.guild(f"server {s}", shard=s, shard_count=args.shards), f"room-{c}")
            for s in range(args.shards)
            for c in range(args.channels)
        ]
        self.people = [self.fake.user(f"user{n}") for n in range(16)]
        self.redis = RedisServer(folder / "redis", fsync="everysec")
        self.client: Any = None
        self.gateways: list[subprocess.Popen[bytes]] = []

    async def __aenter__(self) -> Deployment:
        await self.fake.start()
        self.redis.start()
        self.client = redis.asyncio.Redis.from_url(self.redis.url, decode_responses=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for proc in self.gateways:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.gateways:
            try:
                await asyncio.wait_for(asyncio.to_thread(proc.wait), 30)
            except TimeoutError:
                proc.kill()
        await self.client.aclose()
        await self.fake.close()
        self.redis.stop()

    def start_gateway(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "TELEGRAM_", "REDIS_", "LLM_"))}
        env.update(
            PYTHONPATH=str(ROOT),
            REDIS_URL=self.redis.url,
            REDIS_LEASE_SECONDS=str(self.args.lease),
            REDIS_INBOX_CAP="1000000",
            DISCORD_TOKEN="fake-token",
            DISCORD_API_URL=self.fake.api_url,
            DISCORD_GATEWAY_URL=self.fake.gateway_url,
            DISCORD_GUILD_READY_TIMEOUT="0.05",
            DISCORD_SYNC_COMMANDS="false",
            DISCORD_REPLY_POLICY="always",
            DISCORD_STREAM_REPLIES="false",
            DISCORD_SHARD_COUNT="auto",
            DISCORD_IDENTIFY_INTERVAL=str(self.args.identify_interval),
            LLM_PROVIDER="scripted",
            BOT_DATA_DIR=str(self.folder / "data"),
            LOG_LEVEL="WARNING",
            HTTP_PORT="0",
        )
        log = (self.folder / f"gateway-{len(self.gateways)}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "bots.cli", "gateway"], cwd=self.folder, env=env, stdout=log, stderr=log
        )
        self.gateways.append(proc)
        return proc

    def all_connected(self) -> bool:
        return all(self.fake.connected(s) == 1 for s in range(self.args.shards))

    async def holders(self) -> dict[int, int]:
        found = {}
        for key in await self.client.keys("bots:shards:discord:*:lease:*"):
            value = await self.client.get(key)
            if value:
                found[int(key.rsplit(":", 1)[1])] = int(value.split("|", 1)[1].split(":", 1)[0])
        return found

    async def settle(self, pids: set[int]) -> None:
        """Wait until the gateways ``pids`` hold every shard between them, each connected once."""
        await _wait(lambda: self.settled(pids), timeout=120, what="the gateways to share the shards", every=0.05)

    async def settled(self, pids: set[int]) -> bool:
        held = await self.holders()
        return set(held) == set(range(self.args.shards)) and set(held.values()) == pids and self.all_connected()


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes used so far (Linux ``/proc``)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


async def throughput(args: argparse.Namespace, gateways: int) -> tuple[float, float, float]:
    """(messages stored per second, messages the fake sent per second, gateway CPU ms per message)."""
    with tempfile.TemporaryDirectory(prefix="bench-gateways-") as tmp:
        async with Deployment(args, Path(tmp)) as d:
            procs = [d.start_gateway() for _ in range(gateways)]
            await d.settle({p.pid for p in procs})
            warm = min(200, args.messages // 10)
            await _send(d, warm, offset=0)
            await _wait(lambda: _count_is(d.client, warm), timeout=120, what="the warm-up")
            pids = [p.pid for p in procs]
            cpu = _cpu_seconds(pids)
            started = time.perf_counter()
            await _send(d, args.messages, offset=warm)
            sent = time.perf_counter() - started
            await _wait(lambda: _count_is(d.client, warm + args.messages), timeout=300, what="every message stored")
            elapsed = time.perf_counter() - started
            used = _cpu_seconds(pids) - cpu
            return args.messages / elapsed, args.messages / sent, used * 1000 / args.messages


async def _count_is(client: Any, count: int) -> bool:
    return await _stored(client) >= count


async def _send(d: Deployment, count: int, *, offset: int) -> None:
    channels, people = d.channels, d.people
    for i in range(offset, offset + count):
        await d.fake.say(channels[i % len(channels)], f"message {i}", author=people[i % len(people)])


async def takeover(args: argparse.Namespace) -> tuple[float, float, int]:
    """Two gateways; the one holding shard 0 killed: (seconds until its first shard is connected again, until
    all are, how many it held)."""
    with tempfile.TemporaryDirectory(prefix="bench-takeover-") as tmp:
        async with Deployment(args, Path(tmp)) as d:
            procs = [d.start_gateway() for _ in range(2)]
            await d.settle({p.pid for p in procs})
            held = await d.holders()
            victim = next(p for p in procs if p.pid == held[0])
            lost = [s for s, pid in held.items() if pid == victim.pid]
            before = {s: len(d.fake.connections.get(s, [])) for s in lost}
            killed = time.perf_counter()
            victim.kill()
            back: dict[int, float] = {}

            def reconnected() -> bool:
                for s in lost:
                    if s not in back and len(d.fake.connections.get(s, [])) > before[s] and d.fake.connected(s):
                        back[s] = time.perf_counter() - killed
                return len(back) == len(lost)

            await _wait(reconnected, timeout=120, what="the takeover", every=0.005)
            return min(back.values()), max(back.values()), len(lost)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--channels", type=int, default=4, help="channels per shard")
    parser.add_argument("--gateways", default="1,2,4")
    parser.add_argument("--lease", type=float, default=3.0, help="REDIS_LEASE_SECONDS")
    parser.add_argument("--identify-interval", type=float, default=5.0, help="DISCORD_IDENTIFY_INTERVAL")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"gateway ingest (load average {load:.1f}): {args.messages} messages over {args.shards} shards ({args.shards * args.channels} "
        f"channels), fake Discord + redis-server + gateways on {os.cpu_count()} cores"
    )
    base = 0.0
    for n in (int(x) for x in args.gateways.split(",")):
        rate, offered, cpu_ms = await throughput(args, n)
        base = base or rate
        print(
            f"  {n} gateway process{'es' if n > 1 else '  '}: {rate:8.0f} messages stored/s  "
            f"(x{rate / base:.2f} of one; the fake sent {offered:.0f}/s; gateways used {cpu_ms:.2f} ms CPU/message)"
        )
    first, last, lost = await takeover(args)
    print(
        f"takeover after kill -9 (lease {args.lease:g}s, identify interval {args.identify_interval:g}s, "
        f"concurrency {args.shards}): first of its {lost} shards back after {first:.2f}s, all after {last:.2f}s"
    )


if __name__ == "__main__":
    asyncio.run(main())
