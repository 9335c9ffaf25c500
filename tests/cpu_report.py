"""Where the suite's CPU goes: ``python -m pytest -p tests.cpu_report`` (with or without ``-n``) prints, at the
end, the CPU seconds of each test (its process's and those of the child processes it waited for: bots, redis-server,
mypy, Chromium) added up by folder and by file, and the tests that took the most.

It also prints the run's time and how busy the machine's cores were over it (every process's, from ``/proc/stat``):
near 100% the suite is bound by its CPU (make tests cheaper); well below, by its waits (more workers overlap them).
Not counted per test: the fork server's children (``tests/fork_server.py``; their CPU reaches a worker only when the
server ends) and processes a test leaves to a session fixture."""

from __future__ import annotations

import collections
import json
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

TOP = 15
_FOLDER = "TESTS_CPU_REPORT_DIR"
_START: dict[str, Any] = {}
"""The controller's start: its monotonic time and the machine's CPU counters."""


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _machine() -> tuple[int, int]:
    """Jiffies the machine's cores were busy and in all, since boot (``/proc/stat``; zeros where there is none)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # (idle and waiting for I/O)
    return sum(fields[:8]) - idle, sum(fields[:8])


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # (the controller, or a run without xdist: the workers inherit it)
        os.environ[_FOLDER] = tempfile.mkdtemp(prefix="cpu-report-")
        _START.update(time=time.monotonic(), machine=_machine())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    started, cpu = time.monotonic(), _cpu()
    yield
    row = {"id": item.nodeid, "cpu": _cpu() - cpu, "wall": time.monotonic() - started}
    with open(Path(os.environ[_FOLDER]) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    folder = Path(os.environ[_FOLDER])
    rows = [json.loads(line) for path in folder.glob("*.jsonl") for line in path.read_text().splitlines()]
    write = terminalreporter.write_line
    total = sum(row["cpu"] for row in rows)
    terminalreporter.section("CPU seconds (tests.cpu_report)")
    write(f"{total:8.1f}  all {len(rows)} tests")
    if _START:
        (busy, every), (busy0, every0) = _machine(), _START["machine"]
        share = f"{100 * (busy - busy0) / (every - every0):.0f}%" if every > every0 else "?"
        write(f"{time.monotonic() - _START['time']:8.1f}  seconds in all; the machine's cores busy {share} of them")
    for label, key in (
        ("folder", lambda i: "/".join(i.split("::")[0].split("/")[:2])),
        ("file", lambda i: i.split("::")[0]),
    ):
        sums: collections.Counter[str] = collections.Counter()
        for row in rows:
            sums[key(row["id"])] += row["cpu"]
        write(f"by {label}:")
        for name, seconds in sums.most_common(TOP):
            write(f"{seconds:8.1f}  {name}")
    write("tests:")
    for row in sorted(rows, key=lambda r: -r["cpu"])[:TOP]:
        write(f"{row['cpu']:8.1f}  {row['id']}  ({row['wall']:.1f} s)")
    shutil.rmtree(folder, ignore_errors=True)
