"""Operations benchmark: what metrics hooks cost per run, how fast the endpoints answer, and how long
``bots run`` takes to become ready and to stop on SIGTERM.

Prints figures; asserts nothing. Run: python bench/ops.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

# bench/core.py is named like the package it measures: keep bench/ off the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.ports

import aiohttp  # noqa: E402

from bots.ops import Ops, serve  # noqa: E402
from core import ScriptedModel, create_agent  # noqa: E402
from extensions.terminal import cli_extension, cli_session  # noqa: E402
from tests.ports import free_port as _free_port  # noqa: E402

REPLY = '<response><reasoning>greet</reasoning><output type="cli:message">Hello there, nice to meet you!</output></response>'
RUNS = 2000


def _agent() -> Any:
    return create_agent(model=ScriptedModel(lambda request: REPLY, chunk_size=64), extensions=[cli_extension()])


async def _per_run(attach: bool) -> list[float]:
    agent = _agent()
    if attach:
        Ops().attach(agent)
    times = []
    async with agent:
        for i in range(RUNS):
            started = time.perf_counter()
            await agent.send(cli_session, f"s{i % 50}", {"type": "cli:message", "data": "hi"})
            times.append(time.perf_counter() - started)
    return times


async def _endpoints() -> dict[str, list[float]]:
    ops = Ops()
    agent = _agent()
    ops.attach(agent)
    out: dict[str, list[float]] = {"/healthz": [], "/readyz": [], "/metrics": []}
    async with agent, serve(ops, host="127.0.0.1", port=0) as port, aiohttp.ClientSession() as http:
        for i in range(200):
            await agent.send(cli_session, f"s{i}", {"type": "cli:message", "data": "hi"})
        for path, samples in out.items():
            for _ in range(300):
                started = time.perf_counter()
                async with http.get(f"http://127.0.0.1:{port}{path}") as response:
                    await response.read()
                samples.append(time.perf_counter() - started)
    return out


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:7.3f} ms   p99 {p99 * 1000:7.3f} ms"


def _process_lifecycle(rounds: int = 5) -> tuple[list[float], list[float]]:
    ready, stop = [], []
    for _ in range(rounds):
        port = _free_port()
        with tempfile.TemporaryDirectory() as folder:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("BOT_", "LLM_", "HTTP_", "LOG_"))}
            # LOG_LEVEL=INFO: "ready" is logged at INFO (standard input is a pipe, not a terminal: no terminal chat,
            # bots run serves the endpoints and the web chat until SIGTERM, and says "ready with ...")
            env.update(
                LLM_PROVIDER="scripted", HTTP_PORT=str(port), BOT_DATA_DIR=str(Path(folder) / "data"), LOG_LEVEL="INFO"
            )
            started = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "bots.cli", "run"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd=folder,
                env=env,
            )
            assert proc.stderr is not None
            for line in proc.stderr:
                if "ready:" in line or "ready with" in line:
                    break
            ready.append(time.perf_counter() - started)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
                response.read()
            signalled = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
            stop.append(time.perf_counter() - signalled)
    return ready, stop


def main() -> None:
    bare = asyncio.run(_per_run(False))
    hooked = asyncio.run(_per_run(True))
    print(f"per run, no metrics hooks     {_ms(bare)}   ({RUNS} runs, in-process, scripted model)")
    print(f"per run, with metrics hooks   {_ms(hooked)}")
    print(f"hook overhead per run (p50)   {(statistics.median(hooked) - statistics.median(bare)) * 1e6:7.1f} us")
    for path, samples in asyncio.run(_endpoints()).items():
        print(f"GET {path:<9}                {_ms(samples)}   (loopback, 300 requests)")
    ready, stop = _process_lifecycle()
    print(f"bots run: start to ready      p50 {statistics.median(ready):6.2f} s   (5 processes)")
    print(f"bots run: SIGTERM to exit     p50 {statistics.median(stop) * 1000:6.0f} ms  max {max(stop) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
