"""Web chat round trip: a visitor's message -> the first words of the answer on the page, through a real
``bots run`` process (LLM_PROVIDER=scripted) and its web chat on 127.0.0.1.

Measured from just before ``POST /chat/send`` until the page's event stream (server-sent events) carries the
answer's first ``post`` event, and until the answer is complete (the stream goes quiet: its last ``edit`` or the
``post`` itself). Prints p50, p90, p99 and max; asserts nothing.

Run: .venv/bin/python bench/web_roundtrip.py [--messages 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
BOTS = ROOT / ".venv" / "bin" / "bots"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _report(title: str, seconds: list[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(
        f"{title:<52} n={len(ms):<4} p50={_percentile(ms, 0.50):6.2f} ms  p90={_percentile(ms, 0.90):6.2f} ms  "
        f"p99={_percentile(ms, 0.99):6.2f} ms  max={max(ms):6.2f} ms  mean={statistics.fmean(ms):6.2f} ms"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def bots_run(data: Path) -> AsyncIterator[str]:
    """``bots run`` with the scripted model and the web chat on a free port; yields the page's address."""
    port = _free_port()
    env = {
        **os.environ,
        "LLM_PROVIDER": "scripted",
        "WEB_PORT": str(port),
        "BOT_DATA_DIR": str(data),
        "HTTP_PORT": "0",
        "LOG_LEVEL": "WARNING",
    }
    proc = await asyncio.create_subprocess_exec(
        str(BOTS), "run", cwd=data, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(300):
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(url + "healthz") as response:
                        if response.status == 200:
                            break
                await asyncio.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        await proc.wait()


async def _pump(response: aiohttp.ClientResponse, queue: asyncio.Queue[dict[str, object]]) -> None:
    async for line in response.content:
        if line.startswith(b"data: "):
            queue.put_nowait(json.loads(line[6:]))


async def _bench(url: str, messages: int, title: str) -> None:
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        async with session.get(url) as response:
            found = re.search(r'name="csrf-token" content="([^"]+)"', await response.text())
            assert found is not None
            csrf = found.group(1)
        first: list[float] = []
        whole: list[float] = []
        async with session.get(url + "chat/events", timeout=aiohttp.ClientTimeout(total=None)) as stream:
            events: asyncio.Queue[dict[str, object]] = asyncio.Queue()
            reader = asyncio.create_task(_pump(stream, events))
            assert (await events.get())["op"] == "ready"
            for n in range(messages + 10):
                started = time.perf_counter()
                async with session.post(
                    url + "chat/send", json={"text": f"message {n}"}, headers={"X-CSRF-Token": csrf}
                ) as sent:
                    assert sent.status == 202, await sent.text()
                shown = done = 0.0
                while True:
                    try:
                        event = await asyncio.wait_for(events.get(), 0.2 if shown else 30)
                    except TimeoutError:
                        break  # quiet for 0.2 s after the first words: the answer is complete
                    if event["op"] in ("post", "edit"):
                        done = time.perf_counter()
                        shown = shown or done
                if n >= 10:  # the first ten warm up
                    first.append(shown - started)
                    whole.append(done - started)
            reader.cancel()
        _report(f"message -> first streamed words, {title}", first)
        _report(f"message -> complete answer, {title}", whole)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    if not BOTS.exists():
        sys.exit(f"{BOTS} is missing: run make install first")
    with tempfile.TemporaryDirectory() as folder:
        async with bots_run(Path(folder)) as url:
            await _bench(url, args.messages, "bots run")


if __name__ == "__main__":
    asyncio.run(main())
