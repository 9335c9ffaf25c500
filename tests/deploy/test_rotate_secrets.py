"""The secret-rotation guide (docs/how-to/rotate-secrets.md, issue 47) as an operator runs it: its Redis commands,
taken from the guide, run against a real primary, its replica and a sentinel that keeps its configuration in a file
written once, as the compose file's sentinels keep /data/sentinel.conf on their volume. Afterwards the new password
opens every server and the sentinel, the old one none, the replica follows the primary again after reconnecting,
and the sentinel, restarted from its own file, watches the primary with the new password."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.bots_fleet import free_port

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "how-to" / "rotate-secrets.md"
OLD, NEW = "old0123456789abcdef", "new0123456789abcdef"
RCLI = (
    'rcli() { case "$1" in redis) p=PRIMARY;; redis-replica) p=REPLICA;; sentinel-*) p=SENTINEL;; esac; '
    'REDISCLI_AUTH="${AUTH:-$OLD}" redis-cli --no-auth-warning -p "$p" "${@:3}"; }\n'
)
"""The guide's ``rcli``, pointed at this test's processes instead of the compose file's containers."""


def guide_commands() -> str:
    blocks = re.findall(r"```sh\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    (steps,) = [b for b in blocks if "SENTINEL SET" in b]
    return steps


def cli(port: int, password: str, *args: str) -> str:
    done = subprocess.run(
        ["redis-cli", "-p", str(port), "--no-auth-warning", "-a", password, *args],
        capture_output=True,
        text=True,
        timeout=10,
    )
    return (done.stdout + done.stderr).strip()


def wait_for(check: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:.0f} s: {what}")
        time.sleep(0.1)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, int]]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server and redis-cli are needed")
    ports = {"redis": free_port(), "redis-replica": free_port(), "sentinel": free_port()}
    procs: list[subprocess.Popen[bytes]] = []

    def server(name: str, *more: str) -> None:
        folder = tmp_path / name
        folder.mkdir()
        args = ["--port", str(ports[name]), "--dir", str(folder), "--save", "", "--appendonly", "no"]
        auth = ["--requirepass", OLD, "--masterauth", OLD]
        procs.append(subprocess.Popen(["redis-server", *args, *auth, *more], stdout=subprocess.DEVNULL))
        wait_for(lambda: cli(ports[name], OLD, "PING") == "PONG", f"{name} answers")

    server("redis")
    server("redis-replica", "--replicaof", "127.0.0.1", str(ports["redis"]))
    conf = tmp_path / "sentinel.conf"  # as the compose file writes it, once, on the sentinel's volume
    conf.write_text(
        f"port {ports['sentinel']}\ndir {tmp_path}\n"
        f"sentinel monitor bots 127.0.0.1 {ports['redis']} 1\n"
        "sentinel down-after-milliseconds bots 5000\n"
        f'sentinel auth-pass bots "{OLD}"\nrequirepass "{OLD}"\n'
    )
    procs.append(subprocess.Popen(["redis-server", str(conf), "--sentinel"], stdout=subprocess.DEVNULL))
    wait_for(lambda: cli(ports["sentinel"], OLD, "PING") == "PONG", "the sentinel answers")
    try:
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


def test_the_redis_password_rotation_of_the_guide_reaches_the_sentinels_file(
    servers: dict[str, int], tmp_path: Path
) -> None:
    primary, replica, sentinel = servers["redis"], servers["redis-replica"], servers["sentinel"]
    wait_for(lambda: "master_link_status:up" in cli(replica, OLD, "INFO", "replication"), "the replica follows")
    rcli = RCLI
    for name, port in (("PRIMARY", primary), ("REPLICA", replica), ("SENTINEL", sentinel)):
        rcli = rcli.replace(name, str(port))
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", rcli + guide_commands()],
        env={"OLD": OLD, "NEW": NEW, "PATH": "/usr/bin:/bin:/usr/local/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "ERR" not in done.stdout + done.stderr, done.stdout
    for port in (primary, replica, sentinel):
        assert cli(port, NEW, "PING") == "PONG"
        assert "WRONGPASS" in cli(port, OLD, "PING")
    # the replica's next connection to the primary signs in with the new password
    cli(replica, NEW, "CLIENT", "KILL", "TYPE", "master")
    wait_for(lambda: "master_link_status:up" in cli(replica, NEW, "INFO", "replication"), "the replica follows again")
    # the sentinel keeps the new password in its own file: restarted from it, it takes it and watches the primary
    conf = tmp_path / "sentinel.conf"
    assert f"auth-pass bots {NEW}" in conf.read_text()
    cli(sentinel, NEW, "SHUTDOWN", "NOSAVE")
    wait_for(lambda: "Connection refused" in cli(sentinel, NEW, "PING"), "the sentinel stops")
    proc = subprocess.Popen(["redis-server", str(conf), "--sentinel"], stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: cli(sentinel, NEW, "PING") == "PONG", "the sentinel answers with the new password")
        assert "WRONGPASS" in cli(sentinel, OLD, "PING")

        def watching() -> bool:
            fields = cli(sentinel, NEW, "SENTINEL", "MASTER", "bots").split("\n")
            return dict(zip(fields[::2], fields[1::2], strict=False)).get("flags", "") == "master"

        wait_for(watching, "the sentinel watches the primary (flags: master, no s_down or disconnected)")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
