"""Queue worker processes that a test module runs from itself (``python -m tests.fleet.<test module>``), so
that a test can kill one with ``kill -9``: the process side (``worker_arguments``, ``run``, ``serve``) and the
test side (``Spawned``, ``kill``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from core import Agent, create_agent
from core.fleet import QueueWorker, RedisBackend, RedisDispatcher, RedisMemoryStore
from tests.agent_args import agent_args
from tests.fork_server import ForkedPopen, spawn_popen

from .conftest import ROOT
from .logs import assert_nothing_left_behind

__all__ = ("Spawned", "kill", "run", "serve", "stop_every", "worker_arguments")

# -- in the worker process -------------------------------------------------------------------------------


def worker_arguments() -> argparse.ArgumentParser:
    """The arguments every such worker takes (a module adds its own): ``--url`` of the redis-server,
    ``--api-url`` and ``--token`` of the fake platform."""
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--api-url", required=True)
    p.add_argument("--token", default="")
    return p


def run(work: Callable[[argparse.Namespace], Awaitable[None]], parser: argparse.ArgumentParser, *, level: str) -> None:
    """Log at ``level`` to stderr, each line with its time and pid, and run ``work`` with the arguments."""
    logging.basicConfig(level=level, format="%(asctime)s %(process)d %(name)s %(message)s")
    asyncio.run(work(parser.parse_args()))


async def serve(backend: RedisBackend, *, attach: Callable[[Agent], object] | None = None, **agent: Any) -> None:
    """Run ``create_agent(**agent)`` (Redis its dispatcher and memory) as a queue worker on ``backend`` until
    it is stopped (SIGTERM); ``backend`` is closed after. ``attach``: called with the agent before it starts
    (to give it schedules, say)."""
    made = create_agent(**agent_args(dispatcher=RedisDispatcher(backend), memory=RedisMemoryStore(backend), **agent))
    if attach is not None:
        attach(made)
    worker = QueueWorker(made, backend)
    try:
        await worker.run()
    finally:
        await backend.close()


# -- in the test -----------------------------------------------------------------------------------------


class Spawned:
    """The processes a test started from the repository's root, each writing its output to
    ``<name>-<n>.log`` in ``folder`` (``n``: its place among them all)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.procs: list[subprocess.Popen[bytes] | ForkedPopen] = []

    def spawn(
        self, name: str, args: list[str], *, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes] | ForkedPopen:
        """``args`` as a process; ``python -m MODULE ...`` (``sys.executable``) forked from the fork server
        (tests/fork_server.py)."""
        with (self.folder / f"{name}-{len(self.procs)}.log").open("wb") as log:
            proc: subprocess.Popen[bytes] | ForkedPopen
            if args[:2] == [sys.executable, "-m"]:
                given = env if env is not None else dict(os.environ)
                proc = spawn_popen(args[2], *args[3:], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=given)
            else:
                proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        """SIGTERM to those still running; SIGKILL to any still there 20 s later. Then fail if a log reports a
        model stream or task left behind (``tests.fleet.logs``)."""
        terminate(self.procs, 20)
        assert_nothing_left_behind(sorted(self.folder.glob("*.log")))


def terminate(procs: Sequence[subprocess.Popen[bytes] | ForkedPopen], timeout: float) -> None:
    """SIGTERM to the ``procs`` still running, SIGKILL to any still there ``timeout`` seconds later."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def stop_every(groups: Sequence[Spawned]) -> None:
    """``stop_all`` on every group, even after one of them found something left behind (that failure is raised
    once all are stopped, so no process outlives its test)."""
    failures: list[AssertionError] = []
    for group in groups:
        try:
            group.stop_all()
        except AssertionError as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


def kill(proc: subprocess.Popen[bytes] | ForkedPopen) -> float:
    """``kill -9`` ``proc`` and wait for it; returns when (``time.monotonic()``)."""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return time.monotonic()
