"""tests/ports.py: ports for the test's servers, below the kernel's range for outgoing connections and never
handed out twice, within a process, across processes, or to a forked child."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.ports import LOWEST, free_port

ROOT = Path(__file__).resolve().parents[1]


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_ports_come_from_below_the_range_client_connections_take_theirs_from() -> None:
    ports = [free_port() for _ in range(50)]
    assert all(LOWEST <= port < _ephemeral_low() for port in ports)
    assert len(set(ports)) == 50


def test_a_port_handed_out_is_bindable_and_a_client_does_not_get_it() -> None:
    port = free_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        with socket.create_connection(("127.0.0.1", port)) as client:
            assert client.getsockname()[1] >= _ephemeral_low()


def test_another_process_never_gets_a_port_this_one_holds() -> None:
    mine = {free_port() for _ in range(200)}
    script = "from tests.ports import free_port\nprint(*[free_port() for _ in range(2000)])"
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    theirs = {int(p) for p in out}
    assert len(theirs) == 2000
    assert not mine & theirs


def test_a_forked_child_never_gets_a_port_its_parent_holds() -> None:
    mine = {free_port() for _ in range(200)}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ports through the pipe, then out without pytest's clean-up
        try:
            os.write(write, " ".join(str(free_port()) for _ in range(500)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        theirs = {int(p) for p in pipe.read().split()}
    os.waitpid(pid, 0)
    assert len(theirs) == 500
    assert not mine & theirs
