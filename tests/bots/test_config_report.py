"""``bots config`` as an operator meets it on a first day: typos in the environment and in ``.env`` named with the
real setting, "no platform configured", ``--changed``, ``--json`` (secrets masked in both), and the servers the
settings name asked for real: a PostgreSQL port that is closed is a problem, Redis's persistence, eviction policy
and ``maxmemory`` are warnings naming the setting to fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bots.config import load_settings
from bots.config_command import config_report
from tests.fleet.server import RedisServer, free_port

SECRET = "sk-live-secret-value-0123456789"


@pytest.mark.usefixtures("settings_env")
async def test_typos_in_the_environment_and_in_dotenv_are_named_with_the_real_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text(f"LLM_PROVIDR=openai\nBOT_HISTROY=40\nLLM_API_KEY={SECRET}\nLOGLEVEL=DEBUG\n")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:not-read-because-misspelt")
    monkeypatch.setenv("DISCROD_TOKEN", "a-misspelt-prefix")  # a typo in the prefix itself
    for other in ("HTTPS_PROXY", "OPENAI_API_KEY", "REDISCLI_AUTH", "POSTGRES_PASSWORD", "HOSTNAME"):
        monkeypatch.setenv(other, "another program's")
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    report = await config_report(load_settings())
    named = {line.split(" ", 1)[0]: line for line in report.warnings}
    assert (
        "did you mean TELEGRAM_TOKEN?" in named["TELEGRAM_BOT_TOKEN"]
        and "the environment" in named["TELEGRAM_BOT_TOKEN"]
    )
    assert "did you mean LLM_PROVIDER?" in named["LLM_PROVIDR"] and ".env" in named["LLM_PROVIDR"]
    assert "did you mean BOT_HISTORY?" in named["BOT_HISTROY"]
    assert "did you mean DISCORD_TOKEN?" in named["DISCROD_TOKEN"] and "did you mean LOG_LEVEL?" in named["LOGLEVEL"]
    assert set(named) == {"TELEGRAM_BOT_TOKEN", "LLM_PROVIDR", "BOT_HISTROY", "DISCROD_TOKEN", "LOGLEVEL"}
    assert "not-read-because-misspelt" not in repr(report) and SECRET not in repr(report)
    assert report.platforms == ["web"] and report.platform_notes[0].startswith("no platform configured")


@pytest.mark.usefixtures("settings_env")
async def test_changed_lists_only_what_differs_from_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setenv("LLM_API_KEY", SECRET)
    monkeypatch.setenv("BOT_MAX_STEPS", "5")  # set, but to its default
    monkeypatch.setenv("TELEGRAM_TOKEN", "123456:telegram-token-value")
    report = await config_report(load_settings(), changed_only=True)
    assert {(s.name, s.value) for s in report.settings} == {
        ("LLM_PROVIDER", "scripted"),
        ("LLM_API_KEY", "********"),
        ("TELEGRAM_TOKEN", "********"),
    }
    assert report.platforms == ["telegram", "web"] and report.platform_notes == []
    everything = await config_report(load_settings())
    assert len(everything.settings) > 50 and {s.name for s in everything.settings if s.changed} == {
        "LLM_PROVIDER",
        "LLM_API_KEY",
        "TELEGRAM_TOKEN",
    }


def test_json_for_scripts_masks_secrets_and_a_closed_postgresql_port_is_a_problem(tmp_path: Path) -> None:
    from tests.bots.test_cli import clean_env

    port = free_port()
    env = clean_env(tmp_path, LLM_API_KEY=SECRET, DATABASE_URL=f"postgresql://bot:pg-password-1@127.0.0.1:{port}/bots")
    for args in (["--json", "--changed"], ["--changed"]):
        done = subprocess.run(
            [sys.executable, "-m", "bots.cli", "config", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
        )
        assert done.returncode == 1, done.stderr
        shown = done.stdout + done.stderr
        assert SECRET not in shown and "pg-password-1" not in shown
        if "--json" in args:
            report = json.loads(done.stdout)
            assert report["ok"] is False
            (problem,) = report["problems"]
            names = {s["name"]: s for s in report["settings"]}
            assert names["LLM_API_KEY"]["value"] == "********" and names["DATABASE_URL"]["value"] == "********"
        else:
            (problem,) = [line.strip() for line in done.stderr.splitlines() if "PostgreSQL" in line]
        assert problem.startswith(f"PostgreSQL at DATABASE_URL=postgresql://bot:********@127.0.0.1:{port}/bots")
        assert "fix DATABASE_URL" in problem


@pytest.mark.usefixtures("settings_env")
async def test_a_postgresql_that_answers_is_described(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setenv("DATABASE_URL", database_url)
    report = await config_report(load_settings())
    assert report.problems == []
    (line,) = report.postgres
    assert "PostgreSQL" in line and "no history tables yet" in line


@pytest.mark.usefixtures("settings_env")
async def test_redis_persistence_eviction_and_maxmemory_are_checked(
    monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer, redis_client: Any
) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setenv("REDIS_URL", redis_server.url)

    async def redis_warnings() -> list[str]:
        report = await config_report(load_settings())
        assert report.problems == [] and report.redis, report.problems
        return [w for w in report.warnings if w.startswith("Redis at ")]

    (warning,) = await redis_warnings()  # the test's server: AOF on, noeviction, no maxmemory
    assert "has no maxmemory" in warning and "set maxmemory" in warning
    await redis_client.config_set("maxmemory", "64mb")
    assert await redis_warnings() == []
    await redis_client.config_set("appendonly", "no")
    await redis_client.config_set("maxmemory-policy", "allkeys-lru")
    persistence, eviction = await redis_warnings()
    assert "keeps nothing on disk" in persistence and "set appendonly yes" in persistence
    assert "allkeys-lru" in eviction and "set maxmemory-policy noeviction" in eviction


def test_config_says_which_embedded_model_answers_and_why(tmp_path: Path) -> None:
    """Issue 55: ``bots config`` names the embedded model's weights and what chose them: the default with what it was
    measured against, LLM_LOCAL_MODEL, or LLM_MODEL_PATH; and how many threads and conversations it runs."""
    from bots.models import model_lines
    from bots.settings import LlmSettings

    default = model_lines(LlmSettings(slots=3, threads=2))  # (auto on 2 threads: the 0.5B, on any machine)
    assert default[0].startswith(
        "embedded: Qwen2.5 Coder 0.5B Instruct, Q4_K_M (491 MB, Apache-2.0), the default, auto -> qwen2.5-0.5b: 2 cores"
    )
    assert "bench/tools.py" in default[0] and default[1].startswith("2 threads, 3 conversations at once")
    chosen = model_lines(LlmSettings(local_model="qwen2.5-0.5b"))
    assert chosen[0].endswith("chosen by LLM_LOCAL_MODEL=qwen2.5-0.5b")
    smol = model_lines(LlmSettings(local_model="smollm2"))
    assert "SmolLM2-135M-Instruct" in smol[0] and "chosen by LLM_LOCAL_MODEL=smollm2" in smol[0]
    path = tmp_path / "mine.gguf"
    assert model_lines(LlmSettings(model_path=path))[0].startswith("embedded: mine.gguf, named by LLM_MODEL_PATH")
    assert model_lines(LlmSettings(provider="openai", model="gpt-4o-mini")) == ["openai: gpt-4o-mini"]
