"""Capacity model: what one answered message costs Redis, and how many messages per second one Redis core carries.

The fleet as deployed: a real redis-server (AOF, ``appendfsync everysec``), the fake Telegram Bot API in this
process, one ``bots gateway`` (long polling) and two ``bots worker`` processes with the scripted model
(``LLM_PROVIDER=scripted``), every other setting at its default.

- counts: for each traffic shape (50 chats x 10 messages, 500 chats x 1, 1 chat x 50; each chat's messages sent at
  once), ``CONFIG RESETSTAT``, the traffic, then ``INFO commandstats`` (every command Redis ran, those inside scripts
  included) and ``MONITOR`` (the commands clients sent: round trips; a ``WAIT`` pipelined after a script and arq's
  ``MULTI``...``EXEC`` count as one), divided by the messages answered;
- rate: messages at a fixed ``--rate`` per second over ``--chats`` chats for ``--seconds``, without MONITOR: Redis
  CPU seconds per 1,000 messages (``INFO cpu``, user + system; the idle fleet's own CPU over the same time is
  measured first and reported apart) and the ceiling it implies for one Redis core (1,000 / CPU seconds per 1,000);
- memory: ``--memory-messages`` messages over ``--memory-chats`` chats (each chat ``--burst`` messages at once, then
  again once answered; ``--concurrency`` chats at once), ``INFO memory`` ``used_memory`` after every tenth of them: the last tenth against the first
  shows whether memory grows with volume; per conversation = (used_memory - the empty fleet's) / conversations.

Prints figures; asserts nothing. Run: .venv/bin/python bench/capacity.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio  # noqa: E402

from tests.fakes.telegram_server import FakeTelegramServer  # noqa: E402
from tests.fleet.server import RedisServer, free_port  # noqa: E402
from tests.fleet.worker_process import terminate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

SHAPES = ((50, 10), (500, 1), (1, 50))
"""(chats, messages each) of the count runs."""


class Fleet:
    """redis-server, the fake Bot API, one gateway and ``workers`` workers."""

    def __init__(self, folder: Path, *, workers: int = 2, settings: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.workers = workers
        self.settings = settings or {}
        self.keep = False
        """Write what MONITOR shows into the folder (``--keep``)."""
        self.redis = RedisServer(folder / "redis", fsync="everysec")
        self.telegram = FakeTelegramServer()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.client: Any = None
        self.next_user = 10_000
        self._seen = 0
        self._answered: set[tuple[int, int]] = set()

    async def start(self) -> None:
        self.redis.start()
        await self.telegram.start()
        self.telegram.post_delay = 0.0
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "TELEGRAM_", "REDIS_", "LLM_"))}
        env.update(
            REDIS_URL=self.redis.url,
            TELEGRAM_TOKEN=self.telegram.token,
            TELEGRAM_API_URL=self.telegram.api_url,
            TELEGRAM_POLL_TIMEOUT="5",
            LLM_PROVIDER="scripted",
            BOT_DATA_DIR=str(self.folder / "data"),
            LOG_LEVEL="WARNING",
            NO_PROXY="127.0.0.1,localhost",
            PYTHONPATH=str(ROOT),
        )
        env.update(self.settings)
        for n in range(self.workers):
            self._spawn(f"worker{n}", "worker", {**env, "HTTP_PORT": str(free_port())})
        self._spawn("gateway", "gateway", {**env, "HTTP_PORT": str(free_port())})
        self.client = redis.asyncio.Redis.from_url(self.redis.url, decode_responses=True)
        await self.telegram.wait_for(lambda: len(self.telegram.calls_of("getUpdates")) > 0, timeout=60)
        await asyncio.sleep(1.0)  # the workers block on the queue
        await self.traffic(5, 1)  # warm up: every process has run once

    def _spawn(self, name: str, role: str, env: dict[str, str]) -> None:
        with (self.folder / f"{name}.log").open("wb") as log:
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bots.cli", role], cwd=self.folder, env=env, stdout=log, stderr=log
                )
            )

    async def stop(self) -> None:
        await asyncio.to_thread(terminate, self.procs, 30)
        if self.client is not None:
            await self.client.aclose()
        await self.telegram.close()
        self.redis.stop()

    def _collect(self) -> None:
        sent = self.telegram.sent
        for message in sent[self._seen :]:
            if message.reply_to is not None:
                self._answered.add((message.chat_id, message.reply_to))
        self._seen = len(sent)

    def say(self, chat: int, text: str) -> tuple[int, int]:
        update = self.telegram.user_says(text, user_id=chat)
        return chat, update["message"]["message_id"]

    async def wait_answered(self, lasts: list[tuple[int, int]], *, timeout: float = 300.0) -> None:
        """Until each chat's last message is answered (a conversation's batches run in order)."""
        deadline = time.monotonic() + timeout
        waiting = set(lasts)
        while waiting:
            self._collect()
            waiting -= self._answered
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(waiting)} chats unanswered after {timeout}s; see {self.folder}/*.log")
            await asyncio.sleep(0.01)

    def chats(self, count: int) -> list[int]:
        first = self.next_user
        self.next_user += count
        return list(range(first, first + count))

    async def traffic(self, chats: int, messages: int, users: list[int] | None = None) -> int:
        """Each of ``chats`` new chats (or ``users``) sends ``messages`` at once; returns when all are answered."""
        users = users or self.chats(chats)
        lasts: dict[int, tuple[int, int]] = {}
        for m in range(messages):  # round robin: a chat's messages are spread over the stream of updates
            for user in users:
                lasts[user] = self.say(user, f"message {m} from {user}")
        await self.wait_answered(list(lasts.values()))
        return len(users) * messages

    async def info(self, section: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.info(section)
        return result


class Monitor:
    """``MONITOR`` on a raw connection: the commands clients send (``lua`` ones are run inside scripts)."""

    def __init__(self, port: int, log: Path | None = None) -> None:
        self.port = port
        self.log = log.open("a") if log is not None else None
        self.client_commands: collections.Counter[str] = collections.Counter()
        self.round_trips = 0
        self.script_commands = 0
        self._last: dict[str, str] = {}
        self._in_multi: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def start(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._writer = writer
        writer.write(b"MONITOR\r\n")
        await writer.drain()
        assert (await reader.readline()).startswith(b"+OK")
        self._task = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            line = await reader.readline()
            if not line:
                return
            self.line(line.decode(errors="replace"))

    def line(self, text: str) -> None:
        # +1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" "..." ...
        if self.log is not None:
            self.log.write(text[:300].rstrip("\n") + "\n")
        try:
            head, rest = text.split("] ", 1)
        except ValueError:
            return
        who = head.rsplit(" ", 1)[-1]
        command = rest.split('"', 2)[1].upper() if '"' in rest else ""
        if who == "lua":
            self.script_commands += 1
            return
        self.client_commands[command] += 1
        previous = self._last.get(who)
        self._last[who] = command
        if who in self._in_multi:
            if command in ("EXEC", "DISCARD"):
                self._in_multi.discard(who)
            return
        if command == "MULTI":
            self._in_multi.add(who)
        elif command == "WAIT" and previous in ("EVALSHA", "EVAL"):
            return  # pipelined with the script it confirms
        self.round_trips += 1

    async def stop(self) -> None:
        await asyncio.sleep(0.2)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._writer is not None:
            self._writer.close()
        if self.log is not None:
            self.log.close()


def commandstats(stats: dict[str, Any]) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


def cpu_of(info: dict[str, Any]) -> float:
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def counts(fleet: Fleet, chats: int, messages: int) -> dict[str, Any]:
    """Commands and round trips per answered message for one traffic shape."""
    await fleet.client.config_resetstat()
    monitor = Monitor(fleet.redis.port, fleet.folder / f"monitor-{chats}x{messages}.log" if fleet.keep else None)
    await monitor.start()
    aof = int((await fleet.info("persistence"))["aof_current_size"])
    started = time.monotonic()
    answered = await fleet.traffic(chats, messages)
    elapsed = time.monotonic() - started
    await monitor.stop()
    aof = int((await fleet.info("persistence"))["aof_current_size"]) - aof
    stats = commandstats(await fleet.info("commandstats"))
    for own in ("monitor", "info", "config|resetstat"):
        stats.pop(own, None)
    total = sum(stats.values())
    evalsha = stats.get("evalsha", 0) + stats.get("eval", 0)
    client = sum(n for c, n in monitor.client_commands.items() if c not in ("MONITOR", "INFO", "CONFIG"))
    top = sorted(stats.items(), key=lambda kv: -kv[1])[:8]
    sent = sorted(monitor.client_commands.items(), key=lambda kv: -kv[1])[:8]
    return {
        "shape": f"{chats} x {messages}",
        "messages": answered,
        "seconds": elapsed,
        "round_trips": monitor.round_trips / answered,
        "client_commands": client / answered,
        "evalsha": evalsha / answered,
        "in_scripts": monitor.script_commands / answered,
        "commands": total / answered,
        "aof": aof / answered,
        "top": ", ".join(f"{name} {n / answered:.1f}" for name, n in top),
        "sent": ", ".join(f"{name.lower()} {n / answered:.2f}" for name, n in sent),
    }


async def rate(fleet: Fleet, *, per_second: float, seconds: float, chats: int) -> dict[str, Any]:
    """Messages at a fixed rate; Redis CPU per 1,000 messages, the idle fleet's taken off."""
    idle_for = min(10.0, seconds)
    before = cpu_of(await fleet.info("cpu"))
    await asyncio.sleep(idle_for)
    idle = (cpu_of(await fleet.info("cpu")) - before) / idle_for
    users = fleet.chats(chats)
    lasts: dict[int, tuple[int, int]] = {}
    total = int(per_second * seconds)
    before = cpu_of(await fleet.info("cpu"))
    procs_before = [process_cpu(p.pid) for p in fleet.procs]
    await fleet.client.config_resetstat()
    started = time.monotonic()
    for n in range(total):
        due = started + n / per_second
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        user = users[n % chats]
        lasts[user] = fleet.say(user, f"message {n}")
    await fleet.wait_answered(list(lasts.values()))
    elapsed = time.monotonic() - started
    used = cpu_of(await fleet.info("cpu")) - before
    procs = [process_cpu(p.pid) - b for p, b in zip(fleet.procs, procs_before, strict=True)]
    ran = commandstats(await fleet.info("commandstats"))
    commands = sum(n for name, n in ran.items() if name not in ("info", "config|resetstat")) / total
    per_1000 = (used - idle * elapsed) / total * 1000
    return {
        "rate": per_second,
        "messages": total,
        "achieved": total / elapsed,
        "cpu_per_1000": per_1000,
        "cpu_per_1000_with_idle": used / total * 1000,
        "idle_cpu_per_second": idle,
        "ceiling": 1000 / per_1000 if per_1000 > 0 else float("inf"),
        "commands": commands,
        "workers_per_1000": sum(procs[: fleet.workers]) / total * 1000,
        "gateway_per_1000": sum(procs[fleet.workers :]) / total * 1000,
    }


async def memory(fleet: Fleet, *, messages: int, chats: int, concurrency: int, burst: int) -> dict[str, Any]:
    """``used_memory`` as ``messages`` go through ``chats`` conversations, each chat writing ``burst`` messages at
    once and again once they are answered, ``concurrency`` chats at once; sampled after every tenth of them."""
    empty = int((await fleet.info("memory"))["used_memory"])
    users = fleet.chats(chats)
    points: list[tuple[int, int, int]] = []
    step = max(burst, messages // 10)
    sent = answered = 0
    mark = step
    free: asyncio.Queue[int] = asyncio.Queue()
    for user in users:
        free.put_nowait(user)
    rounds = collections.Counter[int]()
    sampling = asyncio.Lock()

    async def chat_loop() -> None:
        nonlocal sent, answered, mark
        while sent < messages:
            user = await free.get()
            sent += burst
            last = (0, 0)
            for _ in range(burst):
                rounds[user] += 1
                last = fleet.say(user, f"message {rounds[user]} from {user}")
            await fleet.wait_answered([last])
            answered += burst
            if answered >= mark:
                mark += step
                async with sampling:
                    points.append((answered, *(await usage())))
            free.put_nowait(user)

    async def usage() -> tuple[int, int]:
        """``used_memory``, and the part of it the conversations' history holds (their working memory, bounded by
        the context's ``keep_logs``)."""
        used = int((await fleet.info("memory"))["used_memory"])
        async with fleet.client.pipeline(transaction=False) as pipe:
            for user in users:
                pipe.memory_usage(f"bots:{{telegram:chat:{user}}}:mem:working", samples=0)
            sizes = await pipe.execute()
        return used, sum(int(size or 0) for size in sizes)

    await asyncio.gather(*(chat_loop() for _ in range(concurrency)))
    await asyncio.sleep(1.0)
    points.append((answered, *(await usage())))
    keys = await fleet.client.dbsize()
    return {"empty": empty, "points": points, "chats": chats, "keys": keys}


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bench(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    print(
        "capacity: bots gateway + 2 bots worker, LLM_PROVIDER=scripted, the fake Bot API, redis-server "
        f"{(await asyncio.to_thread(_redis_version))}, appendfsync everysec"
    )
    try:
        if "counts" in args.parts:
            fleet = Fleet(folder / "counts")
            fleet.keep = args.keep
            await fleet.start()
            try:
                print(
                    "| traffic | round trips / message | EVALSHA / message | commands in scripts / message "
                    "| all commands / message | AOF bytes / message | top commands / message |"
                )
                print("|---|---|---|---|---|---|---|")
                sent_by: dict[str, str] = {}
                for chats, each in SHAPES:
                    row = await counts(fleet, chats, each)
                    print(
                        f"| {row['shape']} | {row['round_trips']:.2f} | {row['evalsha']:.2f} | "
                        f"{row['in_scripts']:.1f} | {row['commands']:.1f} | {row['aof']:,.0f} | {row['top']} |"
                    )
                    sent_by[row["shape"]] = row["sent"]
                for shape, sent in sent_by.items():
                    print(f"  sent by clients, {shape}: {sent}")
            finally:
                await fleet.stop()
        if "rate" in args.parts:
            fleet = Fleet(folder / "rate")
            await fleet.start()
            try:
                row = await rate(fleet, per_second=args.rate, seconds=args.seconds, chats=args.chats)
                print(
                    f"rate: {row['messages']} messages at {row['rate']:g}/s over {args.chats} chats "
                    f"(achieved {row['achieved']:.0f}/s, {row['commands']:.1f} commands a message): Redis CPU {row['cpu_per_1000']:.3f} s per 1,000 "
                    f"messages ({row['cpu_per_1000_with_idle']:.3f} s with the idle fleet's "
                    f"{row['idle_cpu_per_second'] * 1000:.1f} ms/s); one Redis core: about "
                    f"{row['ceiling']:,.0f} messages/s; CPU of the workers {row['workers_per_1000']:.2f} s and of "
                    f"the gateway {row['gateway_per_1000']:.2f} s per 1,000 messages (scripted model)"
                )
            finally:
                await fleet.stop()
        if "memory" in args.parts:
            fleet = Fleet(folder / "memory")
            await fleet.start()
            try:
                row = await memory(
                    fleet,
                    messages=args.memory_messages,
                    chats=args.memory_chats,
                    concurrency=args.concurrency,
                    burst=args.burst,
                )
                points = row["points"]
                print(
                    f"memory: {args.memory_messages:,} messages over {args.memory_chats:,} conversations "
                    f"({args.burst} at once per chat)"
                )
                for count, used, history in points:
                    print(
                        f"  after {count:>7,}: used_memory {used / 1e6:8.2f} MB, "
                        f"{(used - row['empty']) / row['chats']:,.0f} B per conversation, of which history "
                        f"{history / row['chats']:,.0f} B; besides the history {(used - history) / 1e6:.2f} MB"
                    )
                (n1, m1, h1) = points[-1]
                # from the first sample whose history is within 5% of the last's: the history at its window
                n0, m0, h0 = next(p for p in points if p[2] >= 0.95 * h1)
                print(
                    f"  from {n0:,} (history at its window) to {n1:,}: used_memory x{m1 / m0:.3f} "
                    f"(x{(m1 - h1) / (m0 - h0):.3f} besides the history), {(m1 - m0) / max(1, n1 - n0):.1f} B more "
                    f"per message; {row['keys']:,} keys"
                )
            finally:
                await fleet.stop()
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def _redis_version() -> str:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=False).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith("v=")), "?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="counts,rate,memory", help="which parts to run (comma-separated)")
    parser.add_argument("--rate", type=float, default=200.0, help="messages per second of the rate run")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of the rate run")
    parser.add_argument("--chats", type=int, default=200, help="chats of the rate run")
    parser.add_argument("--memory-messages", type=int, default=100_000)
    parser.add_argument("--memory-chats", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=100, help="chats waiting for an answer at once (memory)")
    parser.add_argument("--burst", type=int, default=10, help="messages a chat sends at once (memory)")
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--keep", action="store_true", help="keep the folder with the logs")
    args = parser.parse_args()
    args.parts = set(args.parts.split(","))
    if args.quick:
        args.seconds, args.memory_messages = 10.0, 20_000
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
