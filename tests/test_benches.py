"""The benchmarks of ``make bench`` that go through the platforms, the gateway and the stores still run.

A benchmark asserts nothing about its figures and no test ran one, so a change elsewhere could break it unseen:
``bench/web_roundtrip.py`` started its gateway without the ``WEB_SECRET`` gateways have required since, and ``make
bench`` stopped there for a wave before anyone ran it. Each is run here as ``make bench`` runs it, as a process, on
a handful of messages (seconds, not minutes): it must end without an error and print its figures. The figures
themselves are not read (tests never judge timings); the benchmarks that take minutes or the embedded model
(``capacity``, ``redis_queue``, ``local_speed``, ``tools``, ``quality``) are left to their own runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"

RUNS = {
    "core.py": ("--rounds", "1", "--per-round", "20"),
    "telegram_roundtrip.py": ("--messages", "5", "--chats", "2"),
    "discord_roundtrip.py": ("--messages", "5", "--channels", "2"),
    "web_roundtrip.py": ("--messages", "5"),
    "memory.py": ("--messages", "200", "--no-postgres"),
    "rss.py": ("--messages", "500", "--conversations", "20"),
}
"""Each benchmark run and its smallest arguments."""


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_benchmark_runs_and_prints_its_figures(name: str, tmp_path: Path) -> None:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    done = subprocess.run(
        [sys.executable, str(BENCH / name), *RUNS[name]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"bench/{name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert any(ch.isdigit() for ch in done.stdout), f"bench/{name} printed no figures:\n{done.stdout[-2000:]}"
