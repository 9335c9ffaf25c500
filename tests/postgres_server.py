"""A real PostgreSQL for tests and benchmarks: Debian's ``initdb`` + ``pg_ctl`` into a temporary folder, on
127.0.0.1 and a free port, trust authentication, no fsync. ``initdb`` refuses to run as root, so as root
the server runs as the ``postgres`` user (``runuser``) in a folder it owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.ports import free_port as _free_port

__all__ = ("PostgresServer", "pg_bin")


def pg_bin(name: str) -> str:
    """The path of a PostgreSQL program (``initdb``, ``pg_ctl``): on PATH, else the newest under
    ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if not candidates:
        raise RuntimeError(f"{name} not found: install PostgreSQL (apt-get install postgresql)")
    return candidates[-1]


class PostgresServer:
    """One PostgreSQL cluster in a temporary folder."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="bots-pg-", dir="/tmp"))
        self.data = self.folder / "data"
        self._as_root = os.geteuid() == 0
        self._databases = 0

    @property
    def url(self) -> str:
        """The URL of the ``postgres`` database."""
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        return f"postgresql://bot@127.0.0.1:{self.port}/{name}"

    def _run(self, *args: str, timeout: float = 60.0) -> None:
        cmd = list(args)
        if self._as_root:
            cmd = [shutil.which("runuser") or "/usr/sbin/runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
        if done.returncode != 0:
            log = self.folder / "postgres.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stderr.decode(errors='replace')}\n{tail}")

    def start(self) -> None:
        if self._as_root:
            shutil.chown(self.folder, user="postgres")
        if not self.data.exists():
            self._run(pg_bin("initdb"), "-D", str(self.data), "-U", "bot", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-p {self.port} -h 127.0.0.1 -k {self.folder} -c fsync=off -c full_page_writes=off"
        self._run(
            pg_bin("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.folder / "postgres.log"),
            "-w",
            "start",
        )

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        import psycopg

        self._databases += 1
        name = f"t{self._databases}_{os.getpid()}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.database_url(name)

    def stop(self, *, mode: str = "fast") -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", timeout=30)

    def cleanup(self) -> None:
        self.stop(mode="immediate")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                shutil.rmtree(self.folder)
                return
            except OSError:
                time.sleep(0.1)
