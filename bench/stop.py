"""Stop benchmark (issue 37): the time from a Stop press to the model call's cancellation, as the model sees it (its
stream closed by the client), in both deployments.

- engine: one agent in this process, a model that writes without end; the press is ``agent.request_stop`` and the
  figure ends when the model's generator is cancelled (what the engine alone costs);
- one process: ``bots run`` with Telegram on the fake Bot API, the real OpenAI client against a fake
  OpenAI-compatible server that writes without end (``tests.fakes.slow_model``), both in this process; the press is
  a ``/stop`` update put in the fake's queue, the figure ends when the server sees the stream closed;
- fleet: the same with ``bots gateway`` and two ``bots worker`` on a real redis-server (``appendfsync everysec``):
  the gateway takes ``/stop`` and publishes it, the worker holding the conversation cancels the call.

The one-process and fleet rounds alternate (a new person each round: their question, the first words streamed, then
Stop after a random pause), so a slow moment of the machine falls on both. In one process most of the figure is the
Telegram poller's: while an answer is written its update stays unconfirmed, so the poller looks for new updates every
0.1 s (``extensions.telegram.poller.BUSY_INTERVAL``) instead of long polling; the gateway long-polls (it answers
nothing itself) and gets /stop at once. Prints figures; asserts nothing.
Run: .venv/bin/python bench/stop.py [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import InMemoryStore, ModelRequest, context, create_agent, output  # noqa: E402
from core.engine import STOP_MARK  # noqa: E402
from extensions.telegram.definitions import MESSAGE  # noqa: E402
from tests.bots_fleet import env_for  # noqa: E402
from tests.fakes.slow_model import SlowModelServer  # noqa: E402
from tests.fakes.telegram_server import FakeTelegramServer  # noqa: E402
from tests.fleet.server import RedisServer  # noqa: E402

WARM_UP = 2
"""Rounds of each deployment not counted (first imports, first connections)."""
EVERY_CALL = range(1, 1_000_000)
"""Every call of the fake model writes without end."""
WRITE_EVERY = 0.002
"""Seconds between two writes of the fake model: it finds its stream closed at its next write, so the figures of
the one-process and fleet rows are late by up to this much."""


class Deployment:
    """One deployment under test: its fake Bot API, its endless model server and its processes."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.folder = folder
        self.telegram = FakeTelegramServer()
        self.model = SlowModelServer(MESSAGE, endless=EVERY_CALL, delay=WRITE_EVERY)
        self.processes: list[asyncio.subprocess.Process] = []
        self.redis: RedisServer | None = None
        self.figures: list[float] = []

    async def start(self, *, fleet: bool) -> None:
        self.folder.mkdir(parents=True)
        await self.telegram.start()
        self.telegram.post_delay = 0.0
        await self.model.__aenter__()
        settings = {
            "TELEGRAM_TOKEN": self.telegram.token,
            "TELEGRAM_API_URL": self.telegram.api_url,
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": self.model.url,
            "LLM_API_KEY": "sk-bench",
            "LLM_MODEL": "fake-model",
            "LOG_LEVEL": "WARNING",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        if fleet:
            self.redis = RedisServer(self.folder / "redis", fsync="everysec")
            self.redis.start()
            settings["REDIS_URL"] = self.redis.url
            roles = ["gateway", "worker", "worker"]
        else:
            roles = ["run"]
        for n, role in enumerate(roles):
            with (self.folder / f"{role}{n}.log").open("wb") as log:
                self.processes.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "bots.cli",
                        role,
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=log,
                        stderr=log,
                        cwd=self.folder,
                        env=env_for(self.folder, **settings),
                    )
                )
        await self.telegram.wait_for(lambda: len(self.telegram.calls_of("getUpdates")) > 0, timeout=60)
        await asyncio.sleep(2.0)  # the workers block on the queue and listen for Stops

    async def round(self, user: int) -> float:
        """``user`` asks, the answer starts streaming, Stop: seconds from the press to the stream closed."""
        call = self.model.calls + 1
        self.telegram.user_says("tell me a long story", user_id=user)
        async with asyncio.timeout(60):
            await self.model.writing.wait()
        assert call in self.model.began, (call, sorted(self.model.began))
        await asyncio.sleep(random.uniform(0.1, 0.4))  # a few words written (at no fixed phase of any loop)
        pressed = time.monotonic()
        self.telegram.user_says("/stop", user_id=user)
        closed = await self.model.wait_closed(call, timeout=60)
        await self.telegram.wait_for(  # the stopped answer delivered: the run is over
            lambda: any(m.chat_id == user and m.text.endswith(STOP_MARK.strip()) for m in self.telegram.sent),
            timeout=60,
        )
        return closed - pressed

    async def stop(self) -> None:
        for process in self.processes:
            if process.returncode is None:
                process.terminate()
        for process in self.processes:
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
        await self.model.__aexit__(None, None, None)
        await self.telegram.close()
        if self.redis is not None:
            self.redis.stop()


class Endless:
    """An in-process model that writes without end and notes when its call was cancelled."""

    name = model = "endless"
    vision = False
    last_usage = None

    def __init__(self) -> None:
        self.writing = asyncio.Event()
        self.cancelled_at = 0.0

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        try:
            yield '<response><output type="bench:say">Once upon a time'
            self.writing.set()
            while True:
                await asyncio.sleep(0.01)
                yield " and then"
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled_at = time.monotonic()
            raise


async def engine_figures(rounds: int) -> list[float]:
    """Seconds from ``agent.request_stop`` to the model's generator cancelled, in this process."""
    chat = context(type="bench:chat", schema=str, key=lambda s: s)
    say = output(type="bench:say", handler=lambda data, ctx, agent: None)
    figures: list[float] = []
    for n in range(rounds + WARM_UP):
        model = Endless()
        agent = create_agent(model=model, contexts=[chat], outputs=[say], memory=InMemoryStore())
        async with agent:
            running = asyncio.create_task(agent.send(chat, f"c{n}", {"type": "bench:chat", "data": "go"}))
            await model.writing.wait()
            await asyncio.sleep(random.uniform(0.02, 0.08))
            pressed = time.monotonic()
            await agent.request_stop(agent.context_id(chat, f"c{n}"))
            await running
        if n >= WARM_UP:
            figures.append(model.cancelled_at - pressed)
    return figures


def shown(name: str, figures: list[float]) -> str:
    ms = sorted(f * 1000 for f in figures)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return (
        f"{name:<12} n={len(ms):<4} p50 {statistics.median(ms):8.2f} ms   p99 {p99:8.2f} ms   "
        f"min {ms[0]:8.2f} ms   max {ms[-1]:8.2f} ms"
    )


async def main(rounds: int) -> None:
    print(f"Stop -> model call cancelled; {rounds} rounds each (after {WARM_UP} not counted); {os.cpu_count()} cores")
    engine = await engine_figures(rounds)
    print(shown("engine", engine), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-stop-") as folder:
        one = Deployment("one process", Path(folder) / "one")
        fleet = Deployment("fleet", Path(folder) / "fleet")
        try:
            await one.start(fleet=False)
            await fleet.start(fleet=True)
            for n in range(rounds + WARM_UP):
                for deployment in (one, fleet) if n % 2 == 0 else (fleet, one):
                    figure = await deployment.round(user=20_000 + n)
                    if n >= WARM_UP:
                        deployment.figures.append(figure)
        finally:
            await one.stop()
            await fleet.stop()
    print(shown("one process", one.figures))
    print(shown("fleet", fleet.figures))
    print(
        "one process: bots run, Telegram on the fake Bot API, the OpenAI client; fleet: bots gateway + 2 bots worker, "
        "redis-server; the press is a /stop update queued at the fake, the end the fake model server finding the "
        f"stream closed at its next write (every {WRITE_EVERY * 1000:g} ms; both clocks this process's)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="8 rounds")
    args = parser.parse_args()
    asyncio.run(main(8 if args.quick else args.rounds))
