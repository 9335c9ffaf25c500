"""``bots run < /dev/null``: no terminal (a container, a systemd unit with ``StandardInput=null``), no platform
token, the web chat on. It serves the web chat and the endpoints until SIGTERM, and a visitor talks to it through
the web chat's HTTP API as the browser test's page does; no terminal chat opens."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import aiohttp

from bots.models import SCRIPTED_REPLY
from tests.bots_fleet import Process, env_for, free_port
from tests.web.conftest import client
from tests.web.visiting import talk


async def test_run_without_a_terminal_serves_the_web_chat_until_sigterm(
    tmp_path: Path, processes: list[Process]
) -> None:
    web = free_port()
    bot = Process("run", env_for(tmp_path, WEB_PORT=str(web), LOG_LEVEL="INFO"), tmp_path)
    processes.append(bot)
    await bot.start()  # standard input: /dev/null
    warning = await bot.wait_for("no platform configured")
    assert "standard input is not a terminal" in warning["message"] and "web" in warning["message"]
    await bot.wait_for("ready with web")
    async with client() as visitor:
        shown = await talk(f"http://127.0.0.1:{web}/", visitor, "is anyone there?", until=SCRIPTED_REPLY)
        assert [e["text"] for e in shown if e.get("op") == "post"] == [SCRIPTED_REPLY]
        answered = await bot.wait_for("run of ")  # the answer's line at INFO, its duration and no text
        assert " answered in " in answered["message"] and answered["duration_seconds"] >= 0
        assert not any("is anyone there" in line.get("message", "") for line in bot.lines)
        async with aiohttp.ClientSession() as http:
            status, metrics = await bot.get(http, "/metrics")
        assert status == 200 and 'bots_messages_answered_total{platform="web"} 1.0' in metrics
        assert bot.proc is not None and bot.proc.returncode is None  # still serving
        talked_again = await talk(f"http://127.0.0.1:{web}/", visitor, "still there?", until=SCRIPTED_REPLY)
        assert talked_again
    assert await bot.terminate() == 0
    assert bot.lines[-1]["message"] == "stopped"
    data = tmp_path / "data"  # what the bot made is its user's alone
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    made = {p.name: stat.S_IMODE(p.stat().st_mode) for p in data.iterdir()}
    assert {"memory.sqlite3", "web_secret", "web_visitors.sqlite3"} <= set(made)
    assert all(mode == 0o600 for mode in made.values()), made
    assert not any(
        "terminal chat" in line.get("message", "") and "ready" in line.get("message", "") for line in bot.lines
    )


def test_run_without_a_terminal_and_nothing_to_serve_says_what_to_set(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bots.cli", "run"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env_for(tmp_path, WEB_CHAT_ENABLED="false", HTTP_PORT="0"),
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "no platform configured and standard input is not a terminal" in done.stderr
    assert "TELEGRAM_TOKEN" in done.stderr and "WEB_PORT" in done.stderr
