"""The ``bots`` command as a real subprocess: chat over a pipe, config without secrets, bad settings,
and the endpoints and SIGTERM of ``bots run``."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bots.cli import SHUTDOWN_GRACE
from bots.models import SCRIPTED_REPLY
from bots.settings import Settings
from tests.ports import free_port

BOTS = [sys.executable, "-m", "bots.cli"]
GROUPS = tuple(f"{name.upper()}_" for name in Settings.model_fields)
STOP_TIMEOUT = 5.0
DEADLINE = 60.0
"""Seconds a subprocess gets before the test gives up on it (a bound, not a timing assertion)."""


def clean_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The test's environment without any bot setting of the machine, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(GROUPS)}
    env.update(
        LLM_PROVIDER="scripted",
        BOT_DATA_DIR=str(tmp_path / "data"),
        BOT_STOP_TIMEOUT=str(STOP_TIMEOUT),
        PYTHONUNBUFFERED="1",
        BOT_QUIET_MS="0",  # (no test here measures bursts: answered at once)
    )
    env.update(settings)
    return env


def run(tmp_path: Path, *args: str, stdin: str = "", **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BOTS, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(tmp_path, **settings),
        timeout=DEADLINE,
    )


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_chat_answers_a_piped_line_and_exits_on_eof(tmp_path: Path) -> None:
    done = run(tmp_path, "chat", stdin="hello there\n")
    assert done.returncode == 0, done.stderr
    assert f"Daydream> {SCRIPTED_REPLY}" in done.stdout
    assert done.stdout.count("you> ") == 2  # asked again, then EOF ended the session
    assert " INFO " not in done.stderr, "the terminal chat is not interleaved with INFO logs unless LOG_LEVEL asks"


def test_config_shows_sources_and_never_a_secret(tmp_path: Path) -> None:
    secrets = {
        "DISCORD_TOKEN": "MTA5.discord-token-value.XyZ",
        "TELEGRAM_TOKEN": "123456:telegram-token-value",
        "LLM_API_KEY": "sk-api-key-value-0123",
        "LLM_BASE_URL": "http://bot:url-password-value@127.0.0.1:9/v1",
    }
    (tmp_path / ".env").write_text("BOT_NAME=Ada\nTELEGRAM_WEBHOOK_SECRET=dotenv-webhook-secret\n", encoding="utf-8")
    done = run(tmp_path, "config", **secrets)
    out = done.stdout + done.stderr
    for value in [*secrets.values(), "url-password-value", "dotenv-webhook-secret"]:
        if "://" in value:
            value = "url-password-value"
        assert value not in out, f"bots config showed a secret: {value}"
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip() and line.split()[0].isupper()}
    assert lines["DISCORD_TOKEN"].split()[1:] == ["********", "[environment]"]
    assert lines["BOT_NAME"].split()[1:] == ["Ada", "[.env]"]
    assert lines["TELEGRAM_WEBHOOK_SECRET"].split()[1:] == ["********", "[.env]"]
    assert lines["BOT_MAX_STEPS"].split()[1:] == ["5", "[default]"]
    assert "http://bot:********@127.0.0.1:9/v1" in lines["LLM_BASE_URL"]


def test_config_reports_a_missing_extra_in_one_line(tmp_path: Path) -> None:
    code = "import sys; sys.modules['discord'] = None; from bots.cli import main; sys.exit(main(['config']))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(tmp_path, DISCORD_TOKEN="MTA5.discord-token-value.XyZ"),
        timeout=DEADLINE,
    )
    assert done.returncode == 1
    assert "DISCORD_TOKEN is set but the discord extra is not installed: run pip install '.[discord]'" in done.stderr
    assert "discord-token-value" not in done.stdout + done.stderr


def test_bad_settings_stop_startup_with_one_line_each(tmp_path: Path) -> None:
    done = run(tmp_path, "run", LLM_MAX_TOKENS="lots", HTTP_PORT="-1", TELEGRAM_TOKEN="123:telegram-token-value")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "bots: invalid settings:"
    assert [line.split("=")[0].strip() for line in lines[1:]] == ["LLM_MAX_TOKENS", "HTTP_PORT"]
    assert "telegram-token-value" not in done.stderr


class Running:
    """``bots <command>`` in the background, its stderr read line by line."""

    def __init__(self, tmp_path: Path, *args: str, **settings: str) -> None:
        self.proc = subprocess.Popen(
            [*BOTS, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=clean_env(tmp_path, **settings),
        )
        self.seen: list[str] = []

    def wait_for(self, text: str) -> str:
        """Read stderr until a line contains ``text`` (an event, not a sleep)."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"the process ended without logging {text!r}:\n{''.join(self.seen)}")

    def read_stdout_until(self, text: str, *, count: int = 1) -> str:
        """Read stdout until ``text`` was seen ``count`` times (prompts end without a newline)."""
        assert self.proc.stdout is not None
        seen = ""
        while seen.count(text) < count:
            char = self.proc.stdout.read(1)
            if not char:
                raise AssertionError(f"stdout ended before {text!r} x{count}: {seen!r}")
            seen += char
        return seen

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=STOP_TIMEOUT + SHUTDOWN_GRACE + DEADLINE)
        return self.proc.returncode, out, "".join(self.seen) + err


@pytest.fixture
def running(tmp_path: Path) -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for r in started:
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.communicate()


def test_chat_serves_the_endpoints_and_stops_cleanly_on_sigterm(tmp_path: Path, running: list[Running]) -> None:
    port = free_port()  # (bots run opens the terminal chat only on a terminal: tests/bots/test_run_headless.py)
    bot = Running(tmp_path, "chat", HTTP_PORT=str(port), LOG_FORMAT="json", LOG_LEVEL="INFO")
    running.append(bot)
    bot.wait_for("ready: terminal chat")
    status, body = http_get(port, "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, body = http_get(port, "/readyz")
    assert status == 200, body
    assert json.loads(body) == {"ready": True, "checks": {"agent": "ok", "model": "ok"}}
    status, body = http_get(port, "/metrics")
    assert status == 200 and "bots_messages_answered_total" in body
    assert bot.proc.stdin is not None
    bot.proc.stdin.write("hi\n")  # one exchange through the terminal chat, then SIGTERM with stdin still open
    bot.proc.stdin.flush()
    shown = bot.read_stdout_until("you> ", count=2)  # the next prompt: the run is over and counted
    assert SCRIPTED_REPLY in shown
    _, body = http_get(port, "/metrics")
    assert 'bots_messages_answered_total{platform="cli"} 1.0' in body
    assert 'bots_messages_received_total{platform="cli"} 1.0' in body  # as many received as answered
    code, _, err = bot.stop()
    assert code == 0, err
    events = [json.loads(line)["message"] for line in err.splitlines() if line.startswith("{")]
    assert "SIGTERM: stopping (answers in progress may finish)" in events
    assert events[-1] == "stopped"


def test_chat_stops_cleanly_on_sigint_while_waiting_for_a_line(tmp_path: Path, running: list[Running]) -> None:
    port = free_port()
    bot = Running(tmp_path, "chat", HTTP_PORT=str(port), LOG_LEVEL="INFO")
    running.append(bot)
    bot.wait_for("ready: terminal chat")
    assert http_get(port, "/readyz")[0] == 200
    code, _, err = bot.stop(signal.SIGINT)
    assert code == 0, err
    assert "SIGINT: stopping" in err


def test_a_platform_that_cannot_be_reached_fails_without_showing_its_token(tmp_path: Path) -> None:
    token = "123456:telegram-token-value-in-the-url"
    done = run(tmp_path, "run", TELEGRAM_TOKEN=token, TELEGRAM_API_URL=f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 1
    assert "TELEGRAM_API_URL" in done.stderr
    assert token not in done.stdout + done.stderr and "telegram-token-value" not in done.stderr


def test_errors_printed_by_main_mask_every_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import bots.cli
    from core.errors import PlatformError

    token = "MTA5.discord-token-value.XyZ"
    for var in list(os.environ):
        if var.upper().startswith(GROUPS):
            monkeypatch.delenv(var)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISCORD_TOKEN", token)
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setattr(bots.cli, "check_settings", lambda settings, role: [])

    async def fails(settings: object, command: str) -> int:
        raise PlatformError(f"login refused for token {token}")

    monkeypatch.setattr(bots.cli, "_serve", fails)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        assert bots.cli.main(["run"]) == 1
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    assert "login refused for token ********" in err
    assert token not in err


def test_secrets_in_url_query_strings_are_masked_in_bots_config(tmp_path: Path) -> None:
    servers = [{"name": "tools", "url": "http://127.0.0.1:9/mcp?token=mcp-query-token-value&v=2", "required": True}]
    done = run(
        tmp_path,
        "config",
        LLM_PROVIDER="openai",
        LLM_BASE_URL="https://x.example/v1?api-key=llm-query-key-value",
        LLM_API_KEY="sk-api-key-value-0123",
        MCP_SERVERS=json.dumps(servers),
    )
    out = done.stdout + done.stderr
    assert "llm-query-key-value" not in out and "mcp-query-token-value" not in out, out
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip() and line.split()[0].isupper()}
    assert "https://x.example/v1?api-key=********" in lines["LLM_BASE_URL"]
    assert "?token=********&v=********" in out  # the MCP server's line and its problem
