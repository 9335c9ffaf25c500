"""The fork server (tests/fork_server.py): a forked child is what ``python -m MODULE ARGS`` would be (arguments,
environment, folder, import path, standard streams, signal handlers, no other file open), ends with the status
``python`` would end with, and the stand-ins for ``asyncio.subprocess.Process`` and ``subprocess.Popen`` report
it. Each check runs the same probe forked and started for real, and compares."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import fork_server
from tests.fork_server import ForkedPopen, ForkedProcess, spawn_async, spawn_popen

PROBE = """
import json, os, random, signal, sys, threading, time

action = sys.argv[1]
if action == "show":
    handlers = {
        name: str(signal.getsignal(getattr(signal, name)))
        for name in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGCHLD", "SIGHUP", "SIGUSR1", "SIGXFSZ")
    }
    shown = {
        "argv": sys.argv, "name": __name__, "cwd": os.getcwd(), "path": sys.path, "probe": os.environ.get("PROBE"),
        "unset": "PROBE_UNSET" in os.environ, "fds": sorted(os.listdir("/proc/self/fd")), "handlers": handlers,
        "threads": threading.active_count(), "stdout": [sys.stdout.line_buffering, sys.stdout.write_through],
        "stderr": [sys.stderr.line_buffering, sys.stderr.encoding], "stdin": sys.stdin.read(),
    }
    print(json.dumps(shown), file=sys.stderr)
    print("on stdout")
elif action == "random":
    print(random.random(), os.urandom(8).hex(), file=sys.stderr)
elif action == "exit":
    sys.exit(int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2])
elif action == "raise":
    raise ValueError("the probe fails")
elif action == "sleep":
    print("sleeping", file=sys.stderr)
    time.sleep(60)
"""


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    """A folder holding the probe module, ``fork_probe``."""
    (tmp_path / "fork_probe.py").write_text(PROBE)
    return tmp_path


async def run(
    folder: Path, *args: str, forked: bool, env: dict[str, str] | None = None, module: str = "fork_probe"
) -> tuple[int, bytes, Any]:
    """``module`` (the probe) with ``args``, forked or started for real: its exit status, its stderr, the process."""
    stdin = folder / "stdin.txt"
    stdin.write_text("from stdin")
    stdout = folder / "stdout.txt"
    before = os.environ.get(fork_server.SWITCH)
    with stdin.open("rb") as given, stdout.open("wb") as out:
        os.environ[fork_server.SWITCH] = "1" if forked else "0"  # (this test's own: on even when the suite's is off)
        try:
            process = await spawn_async(
                module,
                *args,
                env=env if env is not None else {**os.environ, "PROBE": "yes"},
                cwd=folder,
                stdin=given,
                stdout=out,
                stderr=subprocess.PIPE,
            )
        finally:
            if before is None:
                del os.environ[fork_server.SWITCH]
            else:
                os.environ[fork_server.SWITCH] = before
    assert process.stderr is not None
    err = await process.stderr.read()
    return await process.wait(), err, process


async def test_a_forked_child_sees_what_python_m_would_see(probe: Path) -> None:
    os.environ["PROBE_UNSET"] = "only here"  # not in the environment given
    try:
        env = {k: v for k, v in os.environ.items() if k != "PROBE_UNSET"} | {"PROBE": "yes"}
        forked = await run(probe, "show", "x y", forked=True, env=env)
        real = await run(probe, "show", "x y", forked=False, env=env)
    finally:
        del os.environ["PROBE_UNSET"]
    assert isinstance(forked[2], ForkedProcess) and not isinstance(real[2], ForkedProcess)
    assert forked[0] == real[0] == 0, (forked, real)
    seen, expected = json.loads(forked[1]), json.loads(real[1])
    assert seen == expected
    assert seen["argv"] == [str(probe / "fork_probe.py"), "show", "x y"] and seen["name"] == "__main__"
    assert seen["fds"] == ["0", "1", "2", "3"] and seen["path"][0] == str(probe) and seen["stdin"] == "from stdin"
    assert seen["probe"] == "yes" and not seen["unset"] and seen["threads"] == 1
    assert (probe / "stdout.txt").read_text() == "on stdout\n"


async def test_a_module_the_server_imported_runs_as_main_as_with_python_m(probe: Path) -> None:
    """``bots.cli`` is among what the server imports first: forked, it runs as ``__main__`` all the same, and
    says nothing more than ``python -m bots.cli`` (no warning from ``runpy``)."""
    for forked in (True, False):
        code, err, _ = await run(probe, "config", "--explain", "BOT_APP", forked=forked, module="bots.cli")
        assert code == 0 and err == b"", (forked, err)
        assert "BOT_APP" in (probe / "stdout.txt").read_text()


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        (("exit", "3"), 3, b""),
        (("exit", "bye"), 1, b"bye\n"),
        (("raise",), 1, b"ValueError: the probe fails\n"),
        (("exit", "0"), 0, b""),
    ],
)
async def test_a_forked_child_ends_with_the_status_python_would(
    probe: Path, args: tuple[str, ...], status: int, said: bytes
) -> None:
    for forked in (True, False):  # forked, then started for real: the same
        code, err, _ = await run(probe, *args, forked=forked)
        assert code == status and err.endswith(said), (forked, code, err)


async def test_a_signal_reaches_the_child_and_its_status_says_which(probe: Path) -> None:
    env = {**os.environ, "PROBE": "yes"}
    process = await spawn_async("fork_probe", "sleep", env=env, cwd=probe, stderr=subprocess.PIPE)
    assert isinstance(process, ForkedProcess) and process.stderr is not None
    assert await process.stderr.readline() == b"sleeping\n"
    assert process.returncode is None
    process.send_signal(signal.SIGSTOP)
    process.send_signal(signal.SIGCONT)
    assert process.returncode is None  # stopped and continued: still running
    process.terminate()
    waits = [asyncio.create_task(process.wait()) for _ in range(2)]  # several may wait at once
    assert [await w for w in waits] == [-signal.SIGTERM] * 2
    assert process.returncode == -signal.SIGTERM and await process.stderr.read() == b""
    process.kill()  # ended: nothing is sent


def test_the_popen_stand_in_waits_with_a_bound_and_kills(probe: Path) -> None:
    log = probe / "log"
    with log.open("wb") as out:
        popen = spawn_popen(
            "fork_probe", "sleep", env=dict(os.environ), cwd=probe, stdout=out, stderr=subprocess.STDOUT
        )
    assert isinstance(popen, ForkedPopen) and popen.pid > 0 and popen.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        popen.wait(0.2)
    popen.kill()
    assert popen.wait(30) == -signal.SIGKILL and popen.returncode == -signal.SIGKILL
    assert log.read_text() == "sleeping\n"


async def test_children_draw_different_random_numbers(probe: Path) -> None:
    """``random`` reseeds itself in a forked child (its state is not the server's, nor a sibling's)."""
    first, second = [(await run(probe, "random", forked=True))[1].split() for _ in range(2)]
    assert first[0] != second[0] and first[1] != second[1]


async def test_other_interpreter_settings_or_the_switch_off_start_a_real_process(probe: Path) -> None:
    other = {**os.environ, "PYTHONHASHSEED": "123", "PROBE": "yes"}
    code, _, process = await run(probe, "exit", "0", forked=True, env=other)
    assert code == 0 and isinstance(process, asyncio.subprocess.Process)
    code, _, process = await run(probe, "exit", "0", forked=False)
    assert code == 0 and isinstance(process, asyncio.subprocess.Process)
