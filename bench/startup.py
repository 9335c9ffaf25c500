"""Start-up, as an operator meets it: ``bots --version``, and ``bots run`` on Telegram and on Discord with a hosted
model, from the process's start to its line "ready with <platform>" (the platform connected, the model reachable,
``/readyz`` 200).

The platforms are the project's fakes (tests/fakes: the Bot API and the Discord gateway and REST on 127.0.0.1,
the real python-telegram-bot and discord.py clients talking to them); the hosted model is the fake OpenAI server.
Each figure is the median of ``--runs`` (5) fresh processes, the platforms taken in turn (Telegram, Discord,
Telegram...); each run has a fresh ``BOT_DATA_DIR``. Figures only, never a verdict.

Run: ``python bench/startup.py`` (``--runs 5``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.bots_fleet import setting_prefixes
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.telegram_server import FakeTelegramServer

BOTS = str(Path(sys.executable).with_name("bots"))
TIMEOUT = 120.0


def clean_env(data: Path, **settings: str) -> dict[str, str]:
    prefixes = setting_prefixes()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(prefixes)}
    env.update(
        BOT_DATA_DIR=str(data),
        LOG_FORMAT="json",
        LOG_LEVEL="INFO",
        HTTP_PORT="0",
        WEB_CHAT_ENABLED="false",  # (the platform alone: no web chat on its default port beside it)
        PYTHONUNBUFFERED="1",
        **settings,
    )
    return env


def version_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([BOTS, "--version"], check=True, capture_output=True, timeout=TIMEOUT)
    return time.perf_counter() - started


async def ready_seconds(settings: dict[str, str], platform: str) -> float:
    """Seconds from spawning ``bots run`` to its "ready with <platform>" line."""
    with tempfile.TemporaryDirectory(prefix="bots-startup-") as where:
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            BOTS,
            "run",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=clean_env(Path(where) / "data", **settings),
        )
        assert proc.stderr is not None
        try:
            async with asyncio.timeout(TIMEOUT):
                while line := await proc.stderr.readline():
                    try:
                        message = json.loads(line).get("message", "")
                    except ValueError:
                        continue
                    if message.startswith(f"ready with {platform}"):
                        return time.perf_counter() - started
            raise RuntimeError(f"bots run ended before it was ready on {platform} (exit {await proc.wait()})")
        finally:
            if proc.returncode is None:
                proc.terminate()
                await proc.wait()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    versions = [version_seconds() for _ in range(args.runs)]
    ready: dict[str, list[float]] = {"telegram": [], "discord": []}
    async with FakeOpenAIServer() as model, FakeTelegramServer() as telegram, FakeDiscord() as discord:
        hosted = {"LLM_PROVIDER": "openai", "LLM_BASE_URL": model.url, "LLM_API_KEY": "sk-test", "LLM_MODEL": "m"}
        platforms = {
            "telegram": {**hosted, "TELEGRAM_TOKEN": telegram.token, "TELEGRAM_API_URL": telegram.api_url},
            "discord": {
                **hosted,
                "DISCORD_TOKEN": "fake-token",
                "DISCORD_API_URL": discord.api_url,
                "DISCORD_GATEWAY_URL": discord.gateway_url,
                "DISCORD_GUILD_READY_TIMEOUT": "0.05",
            },
        }
        for _ in range(args.runs):
            for name, settings in platforms.items():  # in turn, so a drift of the machine touches both alike
                ready[name].append(await ready_seconds(settings, name))
    print(f"bots --version: median {statistics.median(versions):.3f} s of {args.runs}")
    for name, seconds in ready.items():
        print(f"bots run ready on {name} with a hosted model: median {statistics.median(seconds):.3f} s of {args.runs}")


if __name__ == "__main__":
    asyncio.run(main())
