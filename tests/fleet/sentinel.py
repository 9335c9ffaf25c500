"""A Redis Sentinel topology for tests, on loopback: a primary, a replica of it, and three sentinels
(``redis-server --sentinel``), each on a free port in its own folder; ``kill_primary`` kills the primary with
``kill -9`` and waits for the sentinels to promote the replica, ``rejoin`` starts the killed one again as a
replica of the new primary, ``partition`` cuts the replica off the primary first (what a promotion then loses
is what only the old primary had), ``force_failover`` promotes the replica while the primary still runs, ``restart`` starts a killed server again
with its own data (as compose and Kubernetes do), ``add_replica`` adds an empty one."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from .server import REDIS_SERVER, RedisServer, free_port

__all__ = ("MASTER", "SentinelTopology", "ask")

MASTER = "bots"
"""The name the sentinels monitor the primary under (``REDIS_SENTINEL_MASTER``)."""
SENTINEL = [found] if (found := shutil.which("redis-sentinel")) else []
"""Debian's ``redis-sentinel`` when installed (``.ci/run`` installs it), else ``redis-server --sentinel``."""
REPLICATION_USER = "replication"
REPLICATION_PASSWORD = "replication-password"


def ask(port: int, *words: str, password: str = "", timeout: float = 1.0) -> str:
    """Send one inline command to 127.0.0.1:``port`` (after ``AUTH password``) and return the raw answer
    (empty when nobody answers)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            if password:
                s.sendall(f"AUTH {password}\r\n".encode())
                s.recv(64)
            s.sendall((" ".join(words) + "\r\n").encode())
            chunks = []
            s.settimeout(timeout)
            while True:
                data = s.recv(65536)
                chunks.append(data)
                text = b"".join(chunks)
                if not data or _complete(text):
                    return text.decode(errors="replace")
    except OSError:
        return ""


def _complete(raw: bytes) -> bool:
    """Whether ``raw`` holds one whole RESP reply (simple, error, integer, bulk or a flat array of bulks)."""
    if not raw.endswith(b"\r\n"):
        return False
    kind = raw[:1]
    if kind in (b"+", b"-", b":"):
        return True
    lines = raw.split(b"\r\n")
    if kind == b"$":
        size = int(lines[0][1:])
        return size < 0 or len(lines) >= 3
    if kind == b"*":
        count = int(lines[0][1:])
        return count <= 0 or len(lines) >= 2 * count + 2
    return True


class SentinelTopology:
    """Two ``redis-server`` (``servers[0]`` the primary at the start) and three sentinels watching them."""

    def __init__(
        self,
        folder: Path,
        *,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
        fsync: str = "always",
        password: str = "",
        replicas: int = 1,
    ) -> None:
        self.folder = folder
        self.password = password
        """The servers' password (``requirepass``, and ``masterauth`` for replication), if any."""
        self.down_after_ms = down_after_ms
        """How long the sentinels wait without an answer before they call a server down."""
        self.failover_timeout_ms = failover_timeout_ms
        """How long one failover attempt may take before the sentinels try again."""
        self.fsync = fsync
        self.servers = [RedisServer(folder / f"redis-{n}", fsync=fsync) for n in range(1 + replicas)]
        self.sentinel_ports = [free_port() for _ in range(3)]
        self._sentinels: list[subprocess.Popen[bytes] | None] = [None, None, None]

    @property
    def sentinels(self) -> str:
        """``REDIS_SENTINELS``."""
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    @property
    def url(self) -> str:
        """``REDIS_URL`` next to the sentinels: only its database and password count (the host is the sentinels'
        answer)."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:6379/0"

    def ask(self, server: RedisServer, *words: str) -> str:
        """``ask`` a server of the topology (with its password)."""
        return ask(server.port, *words, password=self.password)

    def env(self, *, min_replicas: int = 0) -> dict[str, str]:
        """The ``REDIS_*`` variables of a process using this topology."""
        return {
            "REDIS_URL": self.url,
            "REDIS_SENTINELS": self.sentinels,
            "REDIS_SENTINEL_MASTER": MASTER,
            "REDIS_MIN_REPLICAS": str(min_replicas),
        }

    def start(self, *, timeout: float = 20.0) -> None:
        primary, *replicas = self.servers
        for server in self.servers:
            self._start_server(server)
        for replica in replicas:
            self.ask(replica, "REPLICAOF", "127.0.0.1", str(primary.port))
        self._wait(lambda: self.replicas_of(primary) >= len(replicas), timeout, "the replicas to sync")
        for n in range(3):
            self._start_sentinel(n)
        self._wait(lambda: all(self.known_primary(n) == primary.port for n in range(3)), timeout, "the sentinels")
        self._wait(lambda: all(self._peers(n) >= 2 for n in range(3)), timeout, "the sentinels to find each other")

    def _start_server(self, server: RedisServer) -> None:
        server.start()
        ask(server.port, "CONFIG", "SET", "repl-diskless-sync-delay", "0")  # a resync starts at once
        # replicas authenticate as their own user, so that ``partition`` can shut them out alone
        ask(server.port, "ACL", "SETUSER", REPLICATION_USER, "on", f">{REPLICATION_PASSWORD}", "+@all", "~*", "&*")
        ask(server.port, "CONFIG", "SET", "masteruser", REPLICATION_USER)
        ask(server.port, "CONFIG", "SET", "masterauth", REPLICATION_PASSWORD)
        if self.password:
            ask(server.port, "CONFIG", "SET", "requirepass", self.password)

    def _start_sentinel(self, n: int) -> None:
        folder = self.folder / f"sentinel-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        conf = folder / "sentinel.conf"
        port = self.sentinel_ports[n]
        conf.write_text(
            "\n".join(
                [
                    f"port {port}",
                    "bind 127.0.0.1",
                    "protected-mode no",
                    f"dir {folder}",
                    f"logfile {folder / 'sentinel.log'}",
                    f"sentinel monitor {MASTER} 127.0.0.1 {self.servers[0].port} 2",
                    f"sentinel down-after-milliseconds {MASTER} {self.down_after_ms}",
                    f"sentinel failover-timeout {MASTER} {self.failover_timeout_ms}",
                    f"sentinel parallel-syncs {MASTER} 1",
                    f"sentinel auth-pass {MASTER} {self.password}" if self.password else "",
                    "",
                ]
            )
        )
        self._sentinels[n] = subprocess.Popen(
            [*SENTINEL, str(conf)] if SENTINEL else [REDIS_SERVER, str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait(lambda: ask(port, "PING").startswith("+PONG"), 10.0, f"sentinel {n}")

    def _peers(self, n: int) -> int:
        answer = ask(self.sentinel_ports[n], "SENTINEL", "MASTER", MASTER)
        lines = answer.split("\r\n")
        for i, line in enumerate(lines):
            if line == "num-other-sentinels" and i + 2 < len(lines):
                return int(lines[i + 2])
        return 0

    def known_primary(self, n: int = 0) -> int | None:
        """The primary's port as sentinel ``n`` knows it."""
        answer = ask(self.sentinel_ports[n], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
        parts = [p for p in answer.split("\r\n") if p and not p.startswith(("*", "$"))]
        return int(parts[1]) if len(parts) == 2 else None

    def replicas_of(self, server: RedisServer) -> int:
        """Replicas connected to ``server`` (``connected_slaves`` of its INFO)."""
        for line in self.ask(server, "INFO", "replication").split("\r\n"):
            if line.startswith("connected_slaves:"):
                return int(line.split(":")[1])
        return 0

    @property
    def primary(self) -> RedisServer:
        """The server the sentinels call the primary now."""
        ports = (self.known_primary(n) for n in range(len(self.sentinel_ports)))  # (one may be frozen: the next)
        port = next((p for p in ports if p is not None), None)
        found = next((s for s in self.servers if s.port == port), None)
        if found is None:
            raise RuntimeError(f"no sentinel names a primary of this topology (answer: {port})")
        return found

    def partition(self) -> None:
        """Cut the replicas off the primary (as a network partition would): the primary goes on taking writes
        that no replica gets, and a replica promoted now has none of them."""
        primary = self.primary
        self.ask(primary, "ACL", "SETUSER", REPLICATION_USER, "off")
        self.ask(primary, "CLIENT", "KILL", "USER", REPLICATION_USER)
        self._wait(lambda: self.replicas_of(primary) == 0, 10.0, "the replicas to be cut off")

    def kill_primary(self) -> tuple[RedisServer, float]:
        """``kill -9`` the primary; returns it and when (``time.monotonic()``)."""
        victim = self.primary
        victim.stop(sig=signal.SIGKILL)
        return victim, time.monotonic()

    def wait_promoted(self, victim: RedisServer, *, timeout: float = 30.0) -> RedisServer:
        """Wait until every sentinel names another primary than ``victim`` and it answers as one."""

        def promoted() -> bool:
            ports = {self.known_primary(n) for n in range(3)}
            if len(ports) != 1 or victim.port in ports or None in ports:
                return False
            port = ports.pop()
            return port is not None and "role:master" in ask(port, "INFO", "replication", password=self.password)

        self._wait(promoted, timeout, "a replica to be promoted")
        return self.primary

    def force_failover(self, *, timeout: float = 30.0) -> RedisServer:
        """``SENTINEL FAILOVER``: promote the replica while the primary still runs (as sentinels starved of CPU,
        or cut off from it, do). The old primary goes on taking writes until they make it a replica, seconds later
        (``wait_replicated``); returns it."""
        old = self.primary
        self._wait(
            lambda: ask(self.sentinel_ports[0], "SENTINEL", "FAILOVER", MASTER).startswith("+OK"),
            timeout,
            "the sentinels to accept a failover (they must know the replica first)",
        )
        self.wait_promoted(old, timeout=timeout)
        return old

    def wait_replicated(self, *, timeout: float = 60.0) -> None:
        """Wait until the primary the sentinels name has a replica again: after ``force_failover``, once they have
        made the primary they replaced a replica (about ten seconds later), or after any other failover they made
        meanwhile (sentinels starved of CPU do)."""

        def replicated() -> bool:
            ports = {self.known_primary(n) for n in range(3)}
            port = ports.pop() if len(ports) == 1 else None
            return port is not None and "connected_slaves:1" in ask(port, "INFO", "replication", password=self.password)

        self._wait(replicated, timeout, "the primary to have a replica again")

    def rejoin(self, server: RedisServer, *, timeout: float = 30.0) -> None:
        """Start the killed ``server`` again (its AOF) as a replica of the new primary, and wait for it to sync."""
        primary = self.primary
        self._start_server(server)
        self.ask(server, "REPLICAOF", "127.0.0.1", str(primary.port))
        self._wait(lambda: "master_link_status:up" in self.ask(server, "INFO", "replication"), timeout, "the resync")
        # and the primary counts it (what WAIT counts): online, having acknowledged
        port = f"port={server.port},"
        self._wait(
            lambda: any(
                port in line and "state=online" in line
                for line in self.ask(primary, "INFO", "replication").splitlines()
            ),
            timeout,
            "the primary to count the replica",
        )

    def restart(self, server: RedisServer) -> None:
        """Start the killed ``server`` again with its own data (its AOF) and nothing else, as compose's ``restart:
        unless-stopped`` and Kubernetes do: it comes back as the primary it was until the sentinels make it a
        replica of the one they promoted (seconds later)."""
        self._start_server(server)

    def add_replica(self, *, timeout: float = 30.0) -> RedisServer:
        """Start a new, empty server as a replica of the primary (what an operator does when the primary is gone
        for good and the one replica left was promoted), and wait until the primary counts it."""
        server = RedisServer(self.folder / f"redis-{len(self.servers)}", fsync=self.fsync)
        self.servers.append(server)
        primary = self.primary
        self._start_server(server)
        self.ask(server, "REPLICAOF", "127.0.0.1", str(primary.port))
        port = f"port={server.port},"
        self._wait(
            lambda: any(
                port in line and "state=online" in line
                for line in self.ask(primary, "INFO", "replication").splitlines()
            ),
            timeout,
            "the primary to count the new replica",
        )
        return server

    def pause_sentinel(self, n: int) -> None:
        """Freeze sentinel ``n`` (``SIGSTOP``): it answers nobody, its connections hang as behind a cut link."""
        proc = self._sentinels[n]
        if proc is not None:
            proc.send_signal(signal.SIGSTOP)

    def resume_sentinel(self, n: int) -> None:
        """Let sentinel ``n`` run again (``SIGCONT``), with the view of the primary it had when it was frozen."""
        proc = self._sentinels[n]
        if proc is not None:
            proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        for proc in self._sentinels:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        for proc in self._sentinels:
            if proc is not None and proc.poll() is None:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
        for server in self.servers:
            server.stop(sig=signal.SIGKILL)

    @staticmethod
    def _wait(ok: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ok():
                return
            time.sleep(0.02)
        raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
