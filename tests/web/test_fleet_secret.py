"""``WEB_SECRET`` is required where more than one gateway may serve the web chat (issue 47, operators): a gateway
of a fleet without it used to make a key of its own, silently, so every rollout logged the visitors out and two
gateways disagreed. ``bots gateway`` now refuses to start, naming the setting; ``bots run`` (one process) keeps
generating one in its data folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bots.config import check_settings
from bots.settings import Settings
from tests.bots_fleet import env_for, free_port

from .conftest import WEB_SECRET


def settings(**web: object) -> Settings:
    return Settings(redis={"url": "redis://127.0.0.1:1/0"}, web={"port": free_port(), **web})  # type: ignore[arg-type]


def test_a_gateway_without_web_secret_is_refused_naming_the_setting() -> None:
    problems = [p for p in check_settings(settings(), role="gateway") if "WEB_SECRET" in p]
    assert len(problems) == 1 and "every gateway" in problems[0] and "--generate-secret" in problems[0]
    assert not [p for p in check_settings(settings(secret=WEB_SECRET), role="gateway") if "WEB_SECRET" in p]
    assert not [p for p in check_settings(settings(), role="run") if "WEB_SECRET" in p]  # one process: its file


def test_bots_gateway_without_web_secret_stops_at_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bots.cli", "gateway"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env_for(tmp_path, REDIS_URL="redis://127.0.0.1:1/0", WEB_PORT=str(free_port())),
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "WEB_SECRET is empty" in done.stderr and "Traceback" not in done.stderr
