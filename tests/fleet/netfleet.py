"""A Telegram fleet on hosts of its own (``tests.fleet.netns``): the fake Bot API and the model fake on two hosts
(served by this process through sockets of those hosts), ``bots gateway`` and two queue workers
(``tests.fleet.netns_worker``) on three more, a Redis primary, its replicas and three sentinels on one host each.
``NetFleet`` starts and stops it; ``chat_load`` is the usual load (50 chats x 10 messages, interleaved) with a
fault made in the middle; ``settle`` waits for every message to be answered and every batch acknowledged, and
``Result`` holds the usual judgement (lost, answered twice, out of order) with the time to recover."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from tests.fakes.telegram_server import FakeTelegramServer

from .conftest import ROOT
from .deployment import CLEARED
from .netns import FaultProxy, Host, Network
from .sentinel import SENTINEL
from .server import REDIS_SERVER
from .test_e2e_fleet import CHATS, MESSAGES, MODEL_SECONDS, handed_over, leases_given_up, outcome

__all__ = ("HostedTelegram", "NetFleet", "Result")

MASTER = "bots"
REDIS_PORT = 6379
SENTINEL_PORT = 26379
QUIET = 6.0
"""Seconds without a post, nothing pending at the Bot API and nothing waiting in Redis, after which what is not
answered is taken as lost."""
RECORD_WINDOW = 2.0
"""Seconds before a fault during which a worker's post counts as in flight: the Bot API had it, but the record of
it (the reply ledger's entry, the batch's acknowledgement) may have been on its way to Redis when the link went.
(One second held on a quiet machine; with the suite's workers and the embedded model's warm-ups on the same two
cores, a worker cut off after posts from more than a second before had 22 answered again against 16 in flight.)"""


class HostedTelegram(FakeTelegramServer):
    """The fake Bot API listening on ``host`` (port 443 of its own address), answering a post 20 ms late."""

    def __init__(self, host: Host) -> None:
        super().__init__()
        self.host = host
        self.post_delay = 0.02

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("POST", "/bot{token}/{method}", self._handle)
        app.router.add_route("GET", "/bot{token}/{method}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = self.host.listen(443)
        await web.SockSite(self._runner, sock).start()
        self.port = 443

    @property
    def api_url(self) -> str:
        return f"http://{self.host.address}:{self.port}"


class ModelFake:
    """The model's host: ``POST /echo`` streams ``echo: <body>`` back in five pieces over ``MODEL_SECONDS``."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.calls = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host.address}:8000"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/echo", self._echo)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, self.host.listen(8000)).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _echo(self, request: web.Request) -> web.StreamResponse:
        self.calls += 1
        body = f"echo: {(await request.read()).decode()}"
        response = web.StreamResponse()
        await response.prepare(request)
        step = max(1, len(body) // 4)
        for i in range(0, len(body), step):
            await asyncio.sleep(MODEL_SECONDS / 5)
            await response.write(body[i : i + step].encode())
        await response.write_eof()
        return response


@dataclass(kw_only=True)
class Result:
    """What one run of a scenario showed."""

    scenario: str
    lost: int
    twice: int
    out_of_order: int
    in_flight: int
    """Posts the faulty side had in flight (sent by it after the fault)."""
    victims: int = 0
    """Of ``twice``, those of a post of the victim's (``Outcome.victims``): its post made, its record lost."""
    out_of_order_chats: list[str] = field(default_factory=list)
    """The conversations of ``out_of_order`` (``telegram:chat:7003``)."""
    handed_over: set[str] = field(default_factory=set)
    """The conversations whose lease a worker lost or gave up (its log says so)."""
    given_up: int
    """Leases live workers lost or gave up."""
    recover: float
    """Seconds from the start of the fault to the last message answered."""
    notes: dict[str, object] = field(default_factory=dict)

    def row(self) -> str:
        extra = ", ".join(f"{k} {v}" for k, v in self.notes.items())
        return (
            f"{self.scenario:<34} {self.lost:>5} {self.twice:>6} {self.out_of_order:>6} {self.recover:>8.1f}s  "
            f"in flight {self.in_flight}, the victim's {self.victims}, leases given up {self.given_up}"
            f"{f', out of order {sorted(self.out_of_order_chats)}' if self.out_of_order_chats else ''}"
            f"{', ' if extra else ''}{extra}"
        )


class NetFleet:
    """One fleet on its hosts. ``replicas``: Redis replicas of the primary (with sentinels when > 0)."""

    def __init__(self, folder: Path, *, replicas: int = 0, lease: float = 3.0, min_replicas: int = 0) -> None:
        self.folder = folder
        self.replicas = replicas
        self.lease = lease
        self.min_replicas = min_replicas
        self.net = Network()
        self.hosts: dict[str, Host] = {}
        self.telegram: HostedTelegram
        self.model: ModelFake
        self.redis: list[Host] = []
        self.sentinels: list[Host] = []
        self.workers: dict[str, tuple[Host, str]] = {}
        """Worker name -> its host and its token."""
        self.redis_url_override: str | None = None
        """``REDIS_URL`` for the workers instead of the primary's (a ``FaultProxy`` in front of it)."""
        self.cut_at = 0.0
        """``time.monotonic()`` once a scenario's cut is in place (0: it did not say)."""
        self.notes: dict[str, object] = {}
        """What a scenario noted on the way (which replica was promoted...), for its ``Result``."""

    # -- starting ----------------------------------------------------------------------------------------

    async def start(self) -> NetFleet:
        for name in ("telegram", "model", "gateway", "worker-a", "worker-b"):
            self.hosts[name] = self.net.host(name)
        self.redis = [self.net.host(f"redis-{n}") for n in range(1 + self.replicas)]
        if self.replicas:
            self.sentinels = [self.net.host(f"sentinel-{n}") for n in range(3)]
        self.telegram = HostedTelegram(self.hosts["telegram"])
        await self.telegram.start()
        self.model = ModelFake(self.hosts["model"])
        await self.model.start()
        await asyncio.to_thread(self._start_redis)
        return self

    def _start_redis(self) -> None:
        for n, host in enumerate(self.redis):
            self.start_server(host, fresh=True)
            if n:
                host.ask("127.0.0.1", REDIS_PORT, "REPLICAOF", self.redis[0].address, str(REDIS_PORT))
        _wait(lambda: self.connected_replicas(self.redis[0]) >= self.replicas, 20, "the replicas to sync")
        for n, host in enumerate(self.sentinels):
            folder = self.folder / f"sentinel-{n}"
            folder.mkdir(parents=True, exist_ok=True)
            conf = folder / "sentinel.conf"
            conf.write_text(
                "\n".join(
                    [
                        f"port {SENTINEL_PORT}",
                        f"bind {host.address} 127.0.0.1",
                        "protected-mode no",
                        f"dir {folder}",
                        f"logfile {folder / 'sentinel.log'}",
                        f"sentinel monitor {MASTER} {self.redis[0].address} {REDIS_PORT} 2",
                        f"sentinel down-after-milliseconds {MASTER} 1000",
                        f"sentinel failover-timeout {MASTER} 3000",
                        f"sentinel parallel-syncs {MASTER} 2",
                        "",
                    ]
                )
            )
            command = [*SENTINEL, str(conf)] if SENTINEL else [REDIS_SERVER, str(conf), "--sentinel"]
            host.run(command, log=folder / "stdout.log")
        for host in self.sentinels:
            _wait(lambda h=host: h.ask("127.0.0.1", SENTINEL_PORT, "PING").startswith("+PONG"), 10, "a sentinel")
        _wait(lambda: all(self._sentinel_peers(h) >= 2 for h in self.sentinels), 20, "the sentinels to meet")
        _wait(lambda: all(self._known_replicas(h) >= self.replicas for h in self.sentinels), 20, "the replicas known")

    def start_server(self, host: Host, *, fresh: bool = False) -> None:
        """``redis-server`` on ``host`` (its address and loopback, AOF with fsync always), in its own folder."""
        folder = self.folder / host.name
        folder.mkdir(parents=True, exist_ok=True)
        host.run(
            [
                REDIS_SERVER, "--port", str(REDIS_PORT), "--bind", host.address, "127.0.0.1",
                "--protected-mode", "no", "--dir", str(folder), "--appendonly", "yes", "--appendfsync", "always",
                "--save", "", "--maxmemory-policy", "noeviction", "--repl-diskless-sync-delay", "0",
                "--logfile", str(folder / "redis.log"),
            ],
            log=folder / "stdout.log",
        )  # fmt: skip
        _wait(lambda: host.ask("127.0.0.1", REDIS_PORT, "PING").startswith("+PONG"), 10, f"redis on {host.name}")

    def env(self, **settings: str) -> dict[str, str]:
        """The environment of ``bots gateway`` here."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
        env.update(
            BOT_DATA_DIR=str(self.folder / "data"),
            LOG_LEVEL="WARNING",
            HTTP_PORT="8080",
            TELEGRAM_TOKEN=self.telegram.token,
            TELEGRAM_API_URL=self.telegram.api_url,
            TELEGRAM_POLL_TIMEOUT="5",
            REDIS_URL=f"redis://{self.redis[0].address}:{REDIS_PORT}/0",
            REDIS_LEASE_SECONDS=str(self.lease),
            REDIS_RETRY_SECONDS="30",
            REDIS_MIN_REPLICAS=str(self.min_replicas),
            LLM_PROVIDER="scripted",
        )
        if self.sentinels:
            env.update(REDIS_SENTINELS=self.sentinel_list, REDIS_SENTINEL_MASTER=MASTER)
        env.update(settings)
        return env

    @property
    def sentinel_list(self) -> str:
        return ",".join(f"{h.address}:{SENTINEL_PORT}" for h in self.sentinels)

    def gateway(self) -> None:
        self.hosts["gateway"].run(
            [sys.executable, "-m", "bots.cli", "gateway"], log=self.folder / "gateway.log", env=self.env(), cwd=ROOT
        )

    def worker(self, name: str, *, env: dict[str, str] | None = None, schedules: bool = False) -> None:
        """A queue worker on host ``name`` (``worker-a``, ``worker-b``) with a token of its own; ``schedules``: it
        fires the fleet's schedules too."""
        token = f"{self.telegram.token.split(':')[0]}:{name}"
        self.telegram.tokens.add(token)
        host = self.hosts[name]
        args = self._worker_args(token) + (["--schedules"] if schedules else [])
        host.run(args, log=self.folder / f"{name}.log", env={**os.environ, **(env or {})}, cwd=ROOT)
        self.workers[name] = (host, token)

    def _worker_args(self, token: str) -> list[str]:
        url = self.redis_url_override or f"redis://{self.redis[0].address}:{REDIS_PORT}/0"
        args = [sys.executable, "-m", "tests.fleet.netns_worker", "--url", url, "--api-url", self.telegram.api_url]
        args += ["--token", token, "--model-url", self.model.url, "--lease", str(self.lease)]
        return [*args, "--sentinels", self.sentinel_list, "--min-replicas", str(self.min_replicas)]

    async def set_schedules(self, schedules: list[dict[str, object]]) -> None:
        """Store ``schedules`` in the fleet (``tests.fleet.netns_worker --set-schedules``, from the gateway's host),
        their chats made known to the fake Bot API."""
        for item in schedules:
            self.telegram.chat(int(str(item["chat"])))
        listed = self.folder / f"schedules-{len(list(self.folder.glob('schedules-*.json')))}.json"
        listed.write_text(json.dumps(schedules))
        args = [*self._worker_args(self.telegram.token), "--set-schedules", str(listed)]
        proc = self.hosts["gateway"].run(args, log=self.folder / "set-schedules.log", env=dict(os.environ), cwd=ROOT)
        if await asyncio.to_thread(proc.wait, 60) != 0:
            raise AssertionError(f"setting the schedules failed: see {self.folder / 'set-schedules.log'}")

    def proxy(self, on: Host) -> FaultProxy:
        """A ``FaultProxy`` listening on ``on`` in front of the primary (connecting from the primary's host)."""
        return FaultProxy(on, self.redis[0], (self.redis[0].address, REDIS_PORT))

    async def start_processes(self) -> None:
        self.gateway()
        self.worker("worker-a")
        self.worker("worker-b")
        await self.telegram.wait_for(lambda: len(self.telegram.calls_of("getUpdates")) > 0, timeout=60)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.telegram.close()
        with contextlib.suppress(Exception):
            await self.model.close()
        await self.net.close()

    # -- Redis as the tests see it ------------------------------------------------------------------------

    def primary(self) -> Host:
        """The host the sentinels name the primary (the first server without sentinels)."""
        if not self.sentinels:
            return self.redis[0]
        for sentinel in self.sentinels:
            answer = sentinel.ask("127.0.0.1", SENTINEL_PORT, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
            parts = [p for p in answer.split("\r\n") if p and not p.startswith(("*", "$"))]
            if parts:
                return next(h for h in self.redis if h.address == parts[0])
        return self.redis[0]

    def ask(self, host: Host, *words: str) -> str:
        """A command to the server on ``host``, from ``host`` itself (no cut is in the way)."""
        return host.ask("127.0.0.1", REDIS_PORT, *words)

    def connected_replicas(self, host: Host) -> int:
        for line in self.ask(host, "INFO", "replication").split("\r\n"):
            if line.startswith("connected_slaves:"):
                return int(line.split(":")[1])
        return 0

    def _sentinel_field(self, host: Host, name: str) -> int:
        lines = host.ask("127.0.0.1", SENTINEL_PORT, "SENTINEL", "MASTER", MASTER).split("\r\n")
        for i, line in enumerate(lines):
            if line == name and i + 2 < len(lines):
                return int(lines[i + 2])
        return 0

    def _sentinel_peers(self, host: Host) -> int:
        return self._sentinel_field(host, "num-other-sentinels")

    def _known_replicas(self, host: Host) -> int:
        return self._sentinel_field(host, "num-slaves")

    def unfinished(self) -> int:
        """Batches not acknowledged and inboxes not empty, on the primary."""
        primary = self.primary()
        count = 0
        for pattern in ("bots:{*}:batch", "bots:{*}:inbox"):
            answer = self.ask(primary, "KEYS", pattern)
            if not answer.startswith("*"):
                return -1
            count += int(answer.split("\r\n")[0][1:])
        return count

    # -- the load and the judgement ------------------------------------------------------------------------

    def check(self) -> None:
        """Fail at once, with its log, if a process of the fleet has exited."""
        for proc in self.net.procs:
            if proc.poll() is not None and proc.returncode not in (0, -9):
                name = " ".join(str(a) for a in proc.args[4:7])  # type: ignore[index]
                raise AssertionError(f"{name} exited with {proc.returncode}; logs in {self.folder}")

    async def chat_load(self, fault: Callable[[], Awaitable[None]] | None = None, *, at: int = 3) -> float:
        """50 chats x 10 messages, a round every 0.15 s; ``fault`` starts (as a task this awaits at the end)
        after round ``at``, once replies are being posted. Returns when the fault started."""
        started = float("inf")
        task: asyncio.Task[None] | None = None
        for m in range(MESSAGES):
            self.check()
            for c in range(CHATS):
                self.telegram.user_says(f"c{c}m{m}", user_id=7000 + c)
            await asyncio.sleep(0.15)
            if m == at and fault is not None:
                await self.telegram.wait_for(lambda: len(self.telegram.sent) > 0, timeout=60)
                started = time.monotonic()
                task = asyncio.create_task(fault())
        if task is not None:
            await task
        return started

    async def settle(self, scenario: str, *, fault_at: float, healed_at: float, victim: str = "") -> Result:
        """Wait until every message is answered (or 150 s pass) and every batch acknowledged, then judge."""
        token = self.workers[victim][1] if victim else ""
        deadline = time.monotonic() + 150
        quiet_since, posts = time.monotonic(), -1
        while time.monotonic() < deadline:
            self.check()
            seen = outcome(self.telegram, token, fault_at - RECORD_WINDOW)
            settled = not self.telegram.pending and await asyncio.to_thread(self.unfinished) == 0
            if settled and not seen.lost:
                break
            if len(self.telegram.sent) != posts or not settled:
                quiet_since, posts = time.monotonic(), len(self.telegram.sent)
            elif time.monotonic() - quiet_since > QUIET:
                break  # nothing left to answer anywhere: what is missing is lost
            await asyncio.sleep(0.2)
        seen = outcome(self.telegram, token, fault_at - RECORD_WINDOW)
        last = max((m.posted_at for m in self.telegram.sent), default=healed_at)
        return Result(
            scenario=scenario,
            lost=len(seen.lost),
            twice=seen.again + seen.fragments,
            out_of_order=len(seen.out_of_order),
            out_of_order_chats=[f"telegram:chat:{7000 + c}" for c in seen.out_of_order],
            handed_over=handed_over(self.folder),
            in_flight=seen.in_flight,
            victims=seen.victims,
            given_up=leases_given_up(self.folder),
            recover=max(0.0, last - fault_at),
        )


def _wait(ok: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
