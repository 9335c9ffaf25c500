"""Web chat round trip: a visitor's message -> the first words of the answer on the page, through a real
``bots run`` process (LLM_PROVIDER=scripted) and its web chat on 127.0.0.1, then through the fleet: ``bots gateway``
(holding the page) and ``bots worker`` (running the conversation) on a redis-server of their own.

Measured from just before ``POST /chat/send`` until the page's event stream (server-sent events) carries the
answer's first ``post`` event, and until the answer is complete (the stream goes quiet: its last ``edit`` or the
``post`` itself). Prints p50, p90, p99 and max; asserts nothing. The conversation answers at once
(``BOT_QUIET_MS=0``, unless it is set): the platforms' default quiet window (400 ms, for messages sent together)
adds its length to each figure.

Run: .venv/bin/python bench/web_roundtrip.py [--messages 200] [--no-fleet]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
BOTS = ROOT / ".venv" / "bin" / "bots"
sys.path.insert(0, str(ROOT))  # the repository root, for tests.fleet's redis-server

from tests.ports import free_port as _free_port  # noqa: E402


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _report(title: str, seconds: list[float]) -> None:
    ms = [s * 1000 for s in seconds]
    print(
        f"{title:<60} n={len(ms):<4} p50={_percentile(ms, 0.50):6.2f} ms  p90={_percentile(ms, 0.90):6.2f} ms  "
        f"p99={_percentile(ms, 0.99):6.2f} ms  max={max(ms):6.2f} ms  mean={statistics.fmean(ms):6.2f} ms"
    )


async def _up(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url + "healthz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.05)
    raise SystemExit(f"{url} did not come up")


@contextlib.asynccontextmanager
async def processes(data: Path, roles: list[str], **settings: str) -> AsyncIterator[str]:
    """``bots <role>`` processes with the scripted model and the web chat on a free port; yields its address."""
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("WEB_", "CONSOLE_", "REDIS_", "LLM_", "BOT_"))},
        "LLM_PROVIDER": "scripted",
        "WEB_PORT": str(port),
        "BOT_DATA_DIR": str(data),
        "HTTP_PORT": "0",
        "LOG_LEVEL": "WARNING",
        "BOT_QUIET_MS": os.environ.get("BOT_QUIET_MS", "0"),  # the framework's time; the default window adds its own
        **settings,
    }
    procs = [
        await asyncio.create_subprocess_exec(
            str(BOTS), role, cwd=data, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL
        )
        for role in roles
    ]
    url = f"http://127.0.0.1:{port}/"
    try:
        await _up(url)
        yield url
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
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


async def _run(messages: int, *, fleet: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        async with processes(Path(folder), ["run"]) as url:
            await _bench(url, messages, "bots run")
    if not fleet:
        return
    from tests.fleet.server import RedisServer

    with tempfile.TemporaryDirectory() as folder:
        redis_server = RedisServer(Path(folder) / "redis", fsync="everysec")
        redis_server.start()
        try:
            # (a gateway on Redis serving the web chat needs the key its peers share: it refuses to start without)
            fleet = {"REDIS_URL": redis_server.url, "WEB_SECRET": secrets.token_urlsafe(32)}
            async with processes(Path(folder), ["gateway", "worker"], **fleet) as url:
                await _bench(url, messages, "gateway + worker on Redis")
        finally:
            redis_server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--no-fleet", action="store_true", help="only bots run")
    args = parser.parse_args()
    if not BOTS.exists():
        sys.exit(f"{BOTS} is missing: run make install first")
    from tests.fleet.server import REDIS_SERVER

    fleet = not args.no_fleet and os.path.exists(REDIS_SERVER)
    if not args.no_fleet and not fleet:
        print("through the fleet: skipped (no redis-server)")
    asyncio.run(_run(args.messages, fleet=fleet))


if __name__ == "__main__":
    main()
