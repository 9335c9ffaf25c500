"""Quiet window benchmark (issue 37): what ``BOT_QUIET_MS`` adds to the time a burst waits for its answer, and how
many model calls a burst costs, in both deployments.

Each round a new conversation gets a burst of ``BURST`` messages ``GAP`` seconds apart; the figure is the time from
the burst's last message to the model call that reads it (as the model sees it), with no window and with one of
``--quiet`` ms:

- one process: one agent in this process (``AgentOptions.quiet_ms``), a scripted model;
- fleet: a gateway (``RedisDispatcher``) and a ``QueueWorker`` in this process on a real redis-server
  (``appendfsync everysec``; ``QueueConfig.quiet_ms``), the probe bot of the queue tests.

Without a window the first message starts a run at once and the others join it (``BOT_BUSY=steer``): a burst costs
more model calls, the first one sooner. Prints figures; asserts nothing.
Run: .venv/bin/python bench/quiet.py [--rounds N] [--quiet MS]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import AgentOptions, ModelRequest, ScriptedModel, context, create_agent, output  # noqa: E402
from core.fleet import QueueConfig, QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore  # noqa: E402
from tests.fleet.probe import ChatArgs, answer, chat, probe_extension  # noqa: E402
from tests.fleet.server import RedisServer  # noqa: E402

BURST = 3
"""Messages in a burst."""
GAP = 0.05
"""Seconds between two messages of a burst."""

talk = context(type="talk", schema=str, key=lambda s: s)


class Timed(ScriptedModel):
    """Notes, per conversation, when each model call came."""

    def __init__(self, reply: object) -> None:
        super().__init__(reply)  # type: ignore[arg-type]
        self.calls: dict[str, list[float]] = {}

    async def stream(self, request: ModelRequest):  # type: ignore[no-untyped-def,override]
        cid = str(request.metadata.get("context_id", ""))
        self.calls.setdefault(cid, []).append(time.perf_counter())
        async for chunk in super().stream(request):
            yield chunk


async def one_process(rounds: int, quiet_ms: int) -> tuple[list[float], list[int]]:
    model = Timed(lambda request: '<response><output type="say">ok</output></response>')
    agent = create_agent(
        model=model,
        contexts=[talk],
        outputs=[output(type="say", handler=lambda data, ctx, agent: None)],
        options=AgentOptions(quiet_ms=quiet_ms),
    )
    waits, calls = [], []
    async with agent:
        for r in range(rounds):
            key = f"q{quiet_ms}-{r}"
            sends = []
            for i in range(BURST):
                sends.append(asyncio.create_task(agent.send(talk, key, {"type": "talk:message", "data": f"m{i}"})))
                if i < BURST - 1:
                    await asyncio.sleep(GAP)
            last = time.perf_counter()
            await asyncio.gather(*sends)
            seen = model.calls.get(f"talk:{key}", [])
            waits.append(max(0.0, seen[-1] - last))  # (the call that reads the last message)
            calls.append(len(seen))
    return waits, calls


async def fleet(rounds: int, quiet_ms: int, server: RedisServer) -> tuple[list[float], list[int]]:
    config = QueueConfig(url=server.url, lease_seconds=5.0, quiet_ms=quiet_ms, busy="steer")
    gateway_backend, worker_backend = RedisBackend(config), RedisBackend(config)
    model = Timed(answer)
    gateway = create_agent(
        model=ScriptedModel(answer),
        extensions=[probe_extension(server.url)],
        dispatcher=RedisDispatcher(gateway_backend),
        memory=RedisMemoryStore(gateway_backend),
    )
    agent = create_agent(
        model=model,
        extensions=[probe_extension(server.url)],
        dispatcher=RedisDispatcher(worker_backend),
        memory=RedisMemoryStore(worker_backend),
    )
    worker = QueueWorker(agent, worker_backend)
    waits, calls = [], []
    async with gateway, asyncio.TaskGroup() as tg:
        running = tg.create_task(worker.run(handle_signals=False))
        await asyncio.sleep(0.5)
        for r in range(rounds):
            key = f"f{quiet_ms}-{r}"
            for i in range(BURST):
                await gateway.send(chat, ChatArgs(chat=key), {"type": "probe:message", "data": f"m{i}"})
                if i < BURST - 1:
                    await asyncio.sleep(GAP)
            last = time.perf_counter()
            cid = f"probe:chat:{key}"
            await _until_settled(gateway_backend, cid)
            seen = model.calls.get(cid, [])
            waits.append(max(0.0, seen[-1] - last))  # (the call that reads the last message)
            calls.append(len(seen))
        worker.stop()
        await running
    await gateway_backend.close()
    await worker_backend.close()
    return waits, calls


async def _until_settled(backend: RedisBackend, cid: str) -> None:
    """Until the conversation's burst is answered (nothing waits, nothing is held), 30 s at most."""
    keys = backend.keys.context(cid)
    for _ in range(3000):
        if not await backend.client.exists(keys.inbox, keys.batch, keys.lease):
            return
        await asyncio.sleep(0.01)


def row(name: str, waits: list[float], calls: list[int]) -> str:
    ms = sorted(w * 1000 for w in waits)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return (
        f"| {name} | {statistics.median(ms):.1f} | {p99:.1f} | {statistics.mean(calls):.2f} |"
        if ms
        else f"| {name} | - | - | - |"
    )


async def main(rounds: int, quiet_ms: int) -> None:
    print(
        f"{BURST} messages {GAP * 1000:.0f} ms apart, {rounds} rounds each; ms from the last message to the model call"
    )
    print("| deployment, BOT_QUIET_MS | p50 ms | p99 ms | model calls per burst |")
    print("| --- | --- | --- | --- |")
    for quiet in (0, quiet_ms):
        print(row(f"one process, {quiet}", *await one_process(rounds, quiet)), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        server = RedisServer(Path(folder), fsync="everysec")
        server.start()
        try:
            for quiet in (0, quiet_ms):
                print(row(f"fleet, {quiet}", *await fleet(rounds, quiet, server)), flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--quiet", type=int, default=500)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.quiet))
