"""``LLM_LOCAL_MODEL=auto``: the larger weights where the machine has the cores and the memory for them and they are
installed, else the default; ``pick_weights`` decides and says why in words (``bots config`` shows it, the bot logs
it when it loads the model).

The thresholds come from measurements (docs/explanation/benchmarks.md). Qwen2.5 Coder 1.5B chose the right tool 9/9
on the tables bot against the 0.5B's 6/9, but does about three times the arithmetic per token, and on 2 cores the
0.5B already takes seconds a line: the 1.5B answers as fast only with three times the cores, so it needs
``LARGER_CORES`` (6). Loaded with the bot's defaults (4 conversations, 4096 tokens each, the helpers' slots) it holds
3.0 GiB resident against 1.2 GiB for the 0.5B: ``LARGER_MEMORY`` (4 GiB available) leaves a gigabyte for the rest of
the process.

Cores are the CPU affinity of the process within a cgroup's ``cpu.max`` quota (a container limited to two cores on a
large host has two); memory is ``MemAvailable`` of ``/proc/meminfo`` within a cgroup's ``memory.max``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .weights import LARGER, QWEN, Weights

__all__ = (
    "AUTO",
    "LARGER_CORES",
    "LARGER_MEMORY",
    "Machine",
    "Pick",
    "available_memory",
    "machine",
    "pick_weights",
    "usable_cores",
)

AUTO = "auto"
"""The ``LLM_LOCAL_MODEL`` value that lets the machine decide (the default)."""
LARGER_CORES = 6
"""Cores the larger weights need: three times the arithmetic per token of the default, three times its 2 cores."""
LARGER_MEMORY = 4 * 1024**3
"""Bytes of memory available the larger weights need: 3.0 GiB resident as the bot loads them, and a margin."""

_CGROUP = Path("/sys/fs/cgroup")
_MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True, kw_only=True)
class Machine:
    """What the machine offers the embedded model."""

    cores: int
    """Cores this process may use."""
    available: int | None
    """Bytes of memory available; None when it cannot be read (not Linux)."""


@dataclass(frozen=True, kw_only=True)
class Pick:
    """The weights ``auto`` chose, and why."""

    weights: Weights
    """The chosen weights."""
    reason: str
    """``auto -> qwen2.5-0.5b: 2 cores (the 1.5B needs 6)``: for ``bots config`` and the log."""


def _gib(size: int) -> str:
    return f"{size / 1024**3:.1f} GiB"


def pick_weights(*, cores: int, available: int | None, larger_installed: bool) -> Pick:
    """The larger weights (``LARGER``) when the machine has ``LARGER_CORES`` cores and ``LARGER_MEMORY`` bytes of
    memory ``available`` and they are installed, else the default (``QWEN``); the reason names what was short."""
    short: list[str] = []
    needs: list[str] = []
    if cores < LARGER_CORES:
        short.append(f"{cores} core{'s' if cores != 1 else ''}")
        needs.append(f"{LARGER_CORES} cores")
    if available is None or available < LARGER_MEMORY:
        short.append("memory available unknown" if available is None else f"{_gib(available)} of memory available")
        needs.append(f"{_gib(LARGER_MEMORY)} available")
    if short:
        return Pick(
            weights=QWEN, reason=f"auto -> {QWEN.name}: {' and '.join(short)} (the 1.5B needs {' and '.join(needs)})"
        )
    has = f"{cores} cores and {_gib(available or 0)} of memory available"
    if not larger_installed:
        return Pick(
            weights=QWEN,
            reason=f"auto -> {QWEN.name}: {has} would run the 1.5B, but it is not installed: make {LARGER.make_target}",
        )
    return Pick(
        weights=LARGER,
        reason=f"auto -> {LARGER.name}: {has} (it needs {LARGER_CORES} cores and {_gib(LARGER_MEMORY)})",
    )


def usable_cores(*, cgroup: Path = _CGROUP) -> int:
    """Cores this process may use: its CPU affinity, within the cgroup's ``cpu.max`` quota (whole cores, one at
    least)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(quota) // int(period)))
    except (OSError, ValueError):  # no cgroup v2 limit here
        pass
    return cores


def available_memory(*, meminfo: Path = _MEMINFO, cgroup: Path = _CGROUP) -> int | None:
    """Bytes of memory available: ``MemAvailable``, within what the cgroup's ``memory.max`` leaves above
    ``memory.current``; None when neither can be read."""
    available: int | None = None
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            left = max(0, int(limit) - int((cgroup / "memory.current").read_text()))
            available = left if available is None else min(available, left)
    except (OSError, ValueError):  # no cgroup v2 limit here
        pass
    return available


def machine() -> Machine:
    """This machine, as ``pick_weights`` weighs it."""
    return Machine(cores=usable_cores(), available=available_memory())
