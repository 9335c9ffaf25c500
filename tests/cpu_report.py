"""Where the suite's CPU goes: ``python -m pytest -p tests.cpu_report`` (with or without ``-n``) prints, at the
end, the CPU seconds of each test (its process's and those of the child processes it waited for: bots, redis-server,
mypy, Chromium) added up by folder and by file, and the tests that took the most.

The suite's time on two cores is bound by its CPU, not by its waits: this says what to make cheaper. Not counted:
the fork server's children (``tests/fork_server.py``; their CPU reaches a worker only when the server ends) and
processes a test leaves to a session fixture."""

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


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # (the controller, or a run without xdist: the workers inherit it)
        os.environ[_FOLDER] = tempfile.mkdtemp(prefix="cpu-report-")


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
