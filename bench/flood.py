"""One address holding idle connections against everyone else (issue 49, point 4).

The HTTP server every public surface uses (``extensions.chat.http_server.start_site``: the web chat, the console, the
ops endpoints, the Telegram webhook) at its default bounds (256 connections, 32 per address). A flooder at 127.0.0.1
opens ``--idle`` connections and keeps them idle (those past its cap are answered 503 and closed; it opens them
again); meanwhile a client at 127.0.0.2 sends ``--requests`` requests, one connection each. The same client against
the idle server is measured in alternating rounds. Prints, per side, the requests answered 200 and the median and
p90 time to the whole answer; the flooded p50 over the idle p50 should stay under 2.

Prints figures; asserts nothing. Run: .venv/bin/python bench/flood.py [--rounds 5] [--idle 300] [--requests 46]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiohttp import web  # noqa: E402

from extensions.chat.http_server import DEFAULT_LIMITS, start_site  # noqa: E402

REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"


async def one_request(port: int) -> tuple[int, float]:
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0))
    try:
        writer.write(REQUEST)
        async with asyncio.timeout(10):
            answer = await reader.read()
    except (TimeoutError, ConnectionError):
        answer = b""
    finally:
        writer.close()
    code = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    return code, time.perf_counter() - started


async def flood(port: int, idle: int, stop: asyncio.Event) -> None:
    """Keep ``idle`` connections from 127.0.0.1 open, reopening those the server closes, never writing a byte."""
    open_: list[asyncio.StreamWriter] = []
    while not stop.is_set():
        open_ = [w for w in open_ if not w.is_closing() and not w.transport.is_closing()]
        for _ in range(idle - len(open_)):
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.1", 0))
            except OSError:
                break
            open_.append(writer)
        await asyncio.sleep(0.05)
    for writer in open_:
        writer.close()


async def side(port: int, requests: int, *, idle: int) -> list[tuple[int, float]]:
    stop = asyncio.Event()
    flooder = asyncio.create_task(flood(port, idle, stop)) if idle else None
    try:
        if flooder is not None:
            await asyncio.sleep(0.5)  # (the flooder holds its connections)
        return [await one_request(port) for _ in range(requests)]
    finally:
        stop.set()
        if flooder is not None:
            await flooder


async def main(rounds: int, idle: int, requests: int) -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner, port = await start_site(app, "127.0.0.1", 0, limits=DEFAULT_LIMITS)
    quiet: list[tuple[int, float]] = []
    flooded: list[tuple[int, float]] = []
    try:
        for _ in range(rounds):  # alternating: the machine's own drift falls on both sides alike
            quiet += await side(port, requests, idle=0)
            flooded += await side(port, requests, idle=idle)
            await asyncio.sleep(0.3)  # (the flooder's connections are gone)
    finally:
        await runner.cleanup()
    print(
        f"limits: {DEFAULT_LIMITS.max_connections} connections, {DEFAULT_LIMITS.max_per_address} per address; "
        f"flooder: {idle} idle connections from 127.0.0.1"
    )
    for name, got in (("idle server", quiet), ("flooded server", flooded)):
        times = sorted(t for _, t in got)
        answered = sum(1 for code, _ in got if code == 200)
        p50, p90 = statistics.median(times), times[int(len(times) * 0.9)]
        print(f"{name:15} {answered}/{len(got)} answered 200, p50 {p50 * 1000:.2f} ms, p90 {p90 * 1000:.2f} ms")
    ratio = statistics.median(t for _, t in flooded) / statistics.median(t for _, t in quiet)
    print(f"flooded p50 / idle p50: {ratio:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--idle", type=int, default=300)
    parser.add_argument("--requests", type=int, default=46)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.idle, args.requests))
