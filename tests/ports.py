"""Ports for the servers a test starts: free now, never handed out twice while the suite runs, and never one the
kernel gives to a client's connection.

A port bound to 0 comes from the kernel's range for outgoing connections (``ip_local_port_range``), where every
client connection of every test takes its local port too: between the check and the server's start, a client
could take it ("address already in use", seen once in six whole runs). Ports here come from below that range,
where the kernel gives out none on its own.

The suite's processes (pytest-xdist's workers, a CI run and a helper's run side by side) share one lock file:
a port is claimed by a POSIX record lock on its byte, held by the claiming process until it exits, so no other
process hands it out meanwhile; within a process a set does the same (a process's own locks do not exclude it).
A forked child keeps the set it was forked with and takes no locks from its parent, so it claims its own.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path

__all__ = ("free_port",)

LOWEST = 20000
LOCK_FILE = Path(tempfile.gettempdir()) / "bots-tests-ports.lock"

_handed: set[int] = set()
_lock_fd: tuple[int, int] | None = None  # (pid, fd): a forked child opens its own


def _highest() -> int:
    """The port below the kernel's range for outgoing connections (32767 when it cannot be read)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low - 1, LOWEST + 1000)


def _fd() -> int:
    global _lock_fd
    if _lock_fd is None or _lock_fd[0] != os.getpid():
        # never closed: closing any descriptor of the file would drop all of this process's locks on it
        _lock_fd = (os.getpid(), os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666))
    return _lock_fd[1]


def _claim(port: int) -> bool:
    try:
        fcntl.lockf(_fd(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port, os.SEEK_SET)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise
    return True


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on, no other test holds and no client connection will take."""
    highest = _highest()
    span = highest - LOWEST + 1
    start = random.randrange(span)
    for step in range(span):
        port = LOWEST + (start + step) % span
        if port in _handed or not _claim(port):
            continue
        _handed.add(port)  # claimed for this process's life, bindable or not
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port left between {LOWEST} and {highest}")
