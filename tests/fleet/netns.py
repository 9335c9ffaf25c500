"""Hosts of our own for the network-fault tests: each part of a fleet in a network namespace of its own
(``ip netns``), all joined by veth pairs to one bridge that lives in a namespace of its own too, addresses
``10.77.0.N/24`` only inside those namespaces (the machine's own network is never touched).

- ``Network``: the namespaces of one test, named ``<PREFIX><pid>x<n>-<host>``; ``host(name)`` makes one,
  ``cut(a, b)`` drops what ``a`` sends to ``b`` (and, unless ``one_way``, what it receives from ``b``) with
  nftables in ``a``'s namespace (connections across it hang, as behind a dead router: nothing resets them),
  ``heal`` undoes cuts, ``close`` kills every process still in a namespace and deletes them. ``sweep`` (at the
  start of each test) deletes what a killed test run left behind: namespaces of the prefix whose pid is gone.
- ``Host``: ``run`` a process inside it (``ip netns exec``), ``socket()`` made inside it (a socket belongs to the
  namespace its thread was in when it was made: the test process listens or connects "from" any host), ``ask``
  a Redis or a sentinel from it.
- ``FaultProxy``: a TCP proxy in the test process from an address of one host to an address of another, for what
  the kernel here cannot do (no ``netem``): a delay each way, and connections reset at random.

``unavailable()`` says why namespaces cannot be made here (not root, no ``ip`` or ``nft``, a kernel that refuses),
for the tests to skip with."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from .sentinel import _complete

__all__ = ("FAKETIME", "PREFIX", "FaultProxy", "Host", "Network", "sweep", "unavailable")

PREFIX = "bnf"
"""The start of every namespace name the tests make (``sweep`` deletes leftovers by it)."""
SUBNET = "10.77.0"
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
"""Debian's libfaketime (package ``faketime``): a worker's clock a minute off."""
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
_counter = iter(range(1, 1_000_000))
_CONNECT = socket.socket.connect
"""``socket.connect`` as this module found it (before a test's guard against real network calls replaced it)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def unavailable() -> str | None:
    """Why network namespaces with nftables cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "the network-fault tests make network namespaces: run them as root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing (apt-get install iproute2 nftables; .ci/run installs them)"
    if not Path(FAKETIME).exists():
        return f"libfaketime is missing at {FAKETIME} (apt-get install faketime; .ci/run installs it)"
    probe = f"{PREFIX}{os.getpid()}probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"this machine does not allow network namespaces: {made.stderr.strip()}"
    try:
        nft = subprocess.run(
            ["ip", "netns", "exec", probe, "nft", "add", "table", "inet", "probe"], capture_output=True, text=True
        )
        if nft.returncode != 0:
            return f"nftables does not work in a network namespace here: {nft.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def sweep() -> None:
    """Delete the namespaces (and kill their processes) of test runs that are gone: those named with the prefix
    and a pid that no longer runs."""
    listed = _ip("netns", "list", check=False).stdout.split()
    for name in listed:
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX) :].split("x")[0].split("probe")[0]
        if pid.isdigit() and int(pid) != os.getpid() and Path(f"/proc/{pid}").exists():
            continue
        _kill_inside(name)
        _ip("netns", "del", name, check=False)


def _kill_inside(ns: str) -> None:
    pids = _ip("netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


@contextlib.contextmanager
def _inside(ns: str) -> Iterator[None]:
    """This thread in namespace ``ns`` meanwhile (sockets made now belong to it), then back."""
    with open("/proc/thread-self/ns/net") as own, open(f"/run/netns/{ns}") as target:
        if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
        try:
            yield
        finally:
            if _libc.setns(own.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")


class Host:
    """One namespace on the bridge, with one address."""

    def __init__(self, network: Network, name: str, ns: str, address: str) -> None:
        self.network = network
        self.name = name
        self.ns = ns
        """The namespace's name."""
        self.address = address
        """Its address on the bridge (``10.77.0.N``)."""
        self.cut_to: set[str] = set()
        """Addresses it sends nothing to."""
        self.cut_from: set[str] = set()
        """Addresses it receives nothing from."""

    def run(
        self, args: list[str], *, log: Path, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``args`` inside this host, its output into ``log`` (``ip netns exec`` execs it: the pid is its)."""
        with log.open("ab") as out:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, *args], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd
            )
        self.network.procs.append(proc)
        return proc

    def socket(self, kind: int = socket.SOCK_STREAM) -> socket.socket:
        """A socket of this host's namespace."""
        with _inside(self.ns):
            return socket.socket(socket.AF_INET, kind)

    def listen(self, port: int = 0) -> socket.socket:
        """A listening socket on this host's address (``port`` 0: a free one), non-blocking."""
        sock = self.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.address, port))
        sock.listen(128)
        sock.setblocking(False)
        return sock

    def ask(self, address: str, port: int, *words: str, timeout: float = 1.0) -> str:
        """Send one inline command from this host to ``address:port`` and return the raw answer (empty when
        nobody answers in time)."""
        try:
            with self.socket() as s:
                s.settimeout(timeout)
                s.connect((address, port))
                s.sendall((" ".join(words) + "\r\n").encode())
                chunks: list[bytes] = []
                while True:
                    data = s.recv(65536)
                    chunks.append(data)
                    if not data or _complete(b"".join(chunks)):
                        return b"".join(chunks).decode(errors="replace")
        except OSError:
            return ""

    def _apply_cuts(self) -> None:
        rules = ["table inet fault", "delete table inet fault", "table inet fault {"]
        rules.append("  chain output { type filter hook output priority 0; policy accept;")
        rules += [f"    ip daddr {a} drop" for a in sorted(self.cut_to)]
        rules.append("  }")
        rules.append("  chain input { type filter hook input priority 0; policy accept;")
        rules += [f"    ip saddr {a} drop" for a in sorted(self.cut_from)]
        rules += ["  }", "}", ""]
        subprocess.run(
            ["ip", "netns", "exec", self.ns, "nft", "-f", "-"],
            input="\n".join(rules),
            text=True,
            check=True,
            capture_output=True,
            timeout=30,
        )


class Network:
    """The hosts of one test, on one bridge."""

    def __init__(self) -> None:
        self.tag = f"{PREFIX}{os.getpid()}x{next(_counter)}"
        self.switch = f"{self.tag}-sw"
        self.hosts: dict[str, Host] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        """Every process started in a host (``close`` stops those still running)."""
        self.proxies: list[FaultProxy] = []
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")

    def host(self, name: str) -> Host:
        """A new host ``name``: its namespace, a veth pair to the bridge, the next address."""
        index = len(self.hosts) + 1
        ns = f"{self.tag}-{name}"
        _ip("netns", "add", ns)
        _ip("-n", self.switch, "link", "add", f"v{index}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("-n", self.switch, "link", "set", f"v{index}", "master", "br0", "up")
        address = f"{SUBNET}.{index}"
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        host = Host(self, name, ns, address)
        self.hosts[name] = host
        return host

    def cut(self, a: Host, b: Host, *, one_way: bool = False) -> None:
        """Drop what ``a`` sends to ``b``; unless ``one_way``, what ``b`` sends to ``a`` too (filtered on both)."""
        a.cut_to.add(b.address)
        a._apply_cuts()
        if not one_way:
            b.cut_to.add(a.address)
            b._apply_cuts()

    def isolate(self, a: Host, *others: Host) -> None:
        """``cut`` ``a`` off each of ``others`` both ways."""
        for b in others:
            self.cut(a, b)

    def heal(self, *hosts: Host) -> None:
        """Undo every cut made on ``hosts`` (all hosts when none is named)."""
        for host in hosts or tuple(self.hosts.values()):
            if host.cut_to or host.cut_from:
                host.cut_to.clear()
                host.cut_from.clear()
                host._apply_cuts()

    def stop_processes(self, *, timeout: float = 20.0) -> None:
        """SIGTERM to the processes still running, SIGKILL to those still there ``timeout`` seconds later (at
        once when 0)."""
        for proc in self.procs:
            if proc.poll() is None and timeout:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGCONT)
                    proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    async def close(self, *, graceful: bool = False) -> None:
        """Stop the proxies and every process (``kill -9`` unless ``graceful``: the test has seen what it
        judges), kill what is left in the namespaces, delete them."""
        for proxy in self.proxies:
            await proxy.close()
        await asyncio.to_thread(self.stop_processes, timeout=20.0 if graceful else 0.0)
        for host in self.hosts.values():
            _kill_inside(host.ns)
            _ip("netns", "del", host.ns, check=False)
        _ip("netns", "del", self.switch, check=False)


class FaultProxy:
    """A TCP proxy in this process: accepts on ``listen_host``'s address, connects from ``upstream_host`` to
    ``target``. ``delay``: seconds each chunk waits in each direction (latency; the order is kept). ``reset_every``:
    each connection is reset (RST both sides) after a random time of that mean, as a flaky NAT or load balancer
    does. Both can change while it runs."""

    def __init__(self, listen_host: Host, upstream_host: Host, target: tuple[str, int], *, port: int = 0) -> None:
        self.listen_host = listen_host
        self.upstream_host = upstream_host
        self.target = target
        self.delay = 0.0
        self.reset_every: float | None = None
        self.resets = 0
        """Connections reset so far."""
        self._sock = listen_host.listen(port)
        self.port = int(self._sock.getsockname()[1])
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        listen_host.network.proxies.append(self)

    @property
    def address(self) -> str:
        return self.listen_host.address

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._serve, sock=self._sock)
        return self

    async def close(self) -> None:
        """Stop accepting and reset every connection, those accepted whose task had not started yet too (left
        open, such a connection was reported unclosed when collected, in whichever test ran next)."""
        self._closing = True
        if self._server is not None:
            self._server.close()
            self._server = None
        await asyncio.sleep(0)  # (the tasks of connections accepted just before: they see ``_closing``)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:
            _reset(writer)
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream = self.upstream_host.socket()
        upstream.settimeout(5)
        try:
            # the connect of the socket class itself: the tests' guard against real network calls (tests/conftest.py)
            # lets loopback only, and this socket cannot leave the test's namespaces
            await asyncio.to_thread(_CONNECT, upstream, self.target)
            upstream.setblocking(False)
            up_reader, up_writer = await asyncio.open_connection(sock=upstream)
        except BaseException as exc:
            upstream.close()
            _reset(writer)
            self._tasks.discard(task)
            if isinstance(exc, OSError | TimeoutError):
                return
            raise
        pipes = [asyncio.create_task(self._pipe(reader, up_writer)), asyncio.create_task(self._pipe(up_reader, writer))]
        try:
            while not any(pipe.done() for pipe in pipes):
                await asyncio.wait(pipes, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
                if self.reset_every is not None and random.random() < 0.1 / self.reset_every:
                    self.resets += 1
                    break
        finally:
            for pipe in pipes:
                pipe.cancel()
            for pipe in pipes:
                with contextlib.suppress(BaseException):
                    await pipe
            _reset(writer)
            _reset(up_writer)
            self._tasks.discard(task)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def later() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    return
                await asyncio.sleep(due - time.monotonic())
                writer.write(data)
                await writer.drain()

        async with asyncio.TaskGroup() as group:
            group.create_task(later())
            while True:
                data = await reader.read(65536)
                await queue.put((time.monotonic() + self.delay, data))
                if not data:
                    return


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (SO_LINGER 0), as a middlebox dropping the connection does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
