"""``-p tests.cpu_report``: the CPU seconds of a run, by folder, file and test, and how busy the machine was,
printed at its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_run_with_the_report_prints_its_cpu_by_folder_file_and_test() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "tests.cpu_report", "tests/test_ports.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = done.stdout.split("CPU seconds (tests.cpu_report)", 1)[1]
    assert "all 4 tests" in report
    assert "by folder:" in report and "by file:" in report and "tests/test_ports.py::test_" in report
    assert "seconds in all; the machine's cores busy" in report
