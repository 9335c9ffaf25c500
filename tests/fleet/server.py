"""A real redis-server for tests: its own port and folder, AOF on, and stop / restart / kill."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.ports import free_port

__all__ = ("RedisServer", "free_port")

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisServer:
    """``redis-server`` on 127.0.0.1:<free port> with ``appendonly yes`` in ``folder``."""

    def __init__(self, folder: Path, *, port: int | None = None, fsync: str = "always") -> None:
        self.folder = folder
        self.port = port or free_port()
        self.fsync = fsync
        """``appendfsync``: ``always`` (a kill loses nothing acknowledged) or ``everysec`` (as deploy/ runs it,
        for the benchmarks)."""
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, *, timeout: float = 10.0) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(self.folder),
                "--appendonly", "yes",
                "--appendfsync", self.fsync,
                "--save", "",
                "--maxmemory-policy", "noeviction",
                "--protected-mode", "no",
                "--daemonize", "no",
                "--logfile", str(self.folder / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}; see {self.folder}/redis.log")
            if self.ping():
                return
            time.sleep(0.01)
        raise RuntimeError(f"redis-server on port {self.port} did not answer within {timeout}s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, *, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """Stop it (SIGTERM: Redis flushes its AOF and exits; SIGKILL: as a crash would)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)
        self.proc.wait(timeout)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
