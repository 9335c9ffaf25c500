"""A fork server for the suite's bot processes: ``python -m bots.cli worker`` and ``python -m
tests.fleet.worker_main`` without an interpreter start and the imports each time (about 400 processes in a run
of the suite; in the 50 test files that start them, measured with process accounting: a forked one 0.28 CPU-s,
the median, where a started one spends 1.19).

One server per pytest process (each pytest-xdist worker), started the first time a test asks for a process and
ended with it: ``python -m tests.fork_server``, which imports what those processes import (``PRELOAD``), starts
no thread and no event loop, then waits for requests on a Unix socket. A request is ``python -m MODULE ARGS``
with an environment, a working folder and three file descriptors for stdin, stdout and stderr (passed with
``SCM_RIGHTS``); the server forks a child that takes them, restores the signal handlers of a fresh interpreter,
puts the environment in ``os.environ``, the folder in ``sys.path[0]`` and the arguments in ``sys.argv``, and runs
the module as ``__main__`` (``runpy``, as ``-m`` does); it exits as the interpreter would (non-daemon threads
joined, ``atexit`` handlers run, stdio flushed) through ``os._exit``. The server reaps its children and sends
each one's exit status (a negative signal number when a signal ended it, as ``asyncio`` and ``subprocess`` say
it) on the request's own connection.

In the test, ``spawn_async`` stands in for ``asyncio.create_subprocess_exec`` and ``spawn_popen`` for
``subprocess.Popen``: ``ForkedProcess`` and ``ForkedPopen`` have what the tests use of them (``pid``,
``returncode``, ``send_signal``, ``terminate``, ``kill``, ``wait``, ``poll``, ``stderr`` as a ``StreamReader``).
Signals go straight to the child (``os.kill``), as they would to a process the test started itself.

What differs from a real start: the children share the server's hash seed and what its modules computed when
imported. ``random`` reseeds itself after a fork; ``secrets``, ``uuid`` and ``tempfile`` read ``os.urandom`` or
check the pid; a module of ours that keeps something per process from its import renews it in a forked child
(``os.register_at_fork``, as ``core.entries`` does its ids' prefix). An environment whose interpreter settings (``PYTHON*`` but ``PYTHONUNBUFFERED``, the locale) differ from the
server's gets a real start, and so does everything when ``TESTS_FORK_SERVER=0`` (for a debugger, or to compare).
Tests about the process itself (start-up time, imports, ``--version``, the installed ``bots`` program of
tests/gate/) start it for real and do not come here.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import io
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ("ForkedPopen", "ForkedProcess", "enabled", "spawn_async", "spawn_popen")

ROOT = Path(__file__).resolve().parents[1]

PRELOAD = (
    "bots.cli",
    "bots.app",
    "tests.fleet.worker_main",
    # what a gateway or a worker imports once it runs (found by listing a child's new modules at its exit): the
    # libraries only, not our modules, which may read their environment when imported
    "aiohttp",
    "aiohttp.web",
    "anyio",
    "anyio._backends._asyncio",
    "discord",
    "h2.connection",
    "httpcore2._async",
    "httpx",
    "jsonschema",
    "mcp",
    "openai",
    "openai.lib.streaming.chat",
    "openai.resources.chat.completions",
    "prometheus_client",
    "rich",
    "sse_starlette",
    "starlette",
    "telegram",
    "telegram.ext",
    "tornado",
    "truststore",
    "trio",
    "uvicorn",
)
"""What the server imports before it takes requests (1.4 CPU-s, once per pytest process): the ``bots`` command,
the probe worker of tests/fleet/, and the libraries their processes go on to import."""

SWITCH = "TESTS_FORK_SERVER"
"""``TESTS_FORK_SERVER=0`` starts every process for real (``python -m ...``)."""

REPORT = "TESTS_FORK_SERVER_REPORT"
"""``TESTS_FORK_SERVER_REPORT=FILE``: each child appends to FILE its module, its first argument and the modules it
imported beyond the server's (what ``PRELOAD`` could add)."""

DEVNULL = subprocess.DEVNULL
PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT

_KEPT_VARIABLES = ("PYTHONUNBUFFERED",)
"""Interpreter settings a child may change without a real start (its stdio is made again for it)."""


def enabled() -> bool:
    """Whether processes come from the fork server (``TESTS_FORK_SERVER`` is not ``0``)."""
    return os.environ.get(SWITCH, "1") != "0"


def _interpreter_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The variables read when an interpreter starts: they must be the server's for a fork to stand in for it."""
    return {
        k: v
        for k, v in env.items()
        if (k.startswith("PYTHON") and k not in _KEPT_VARIABLES) or k in ("LANG", "LC_ALL", "LC_CTYPE")
    }


# --- the test's side ---------------------------------------------------------------------------------------------


class _Server:
    """The fork server of this process, started on first use."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.env = dict(os.environ)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fork_server", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.PIPE,  # its end of file (this process gone) stops the server and its children
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
            env=self.env,
        )
        theirs.close()
        self.sock = ours
        self.pid = os.getpid()

    def usable_for(self, env: Mapping[str, str]) -> bool:
        return self.proc.poll() is None and _interpreter_settings(env) == _interpreter_settings(self.env)

    def request(
        self, module: str, args: Sequence[str], env: Mapping[str, str], cwd: Path | str, fds: list[int]
    ) -> socket.socket:
        """Asks for ``python -m module args``; returns the connection its pid and exit status come on."""
        mine, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        payload = json.dumps({"module": module, "args": list(args), "env": dict(env), "cwd": str(cwd)}).encode()
        try:
            socket.send_fds(self.sock, [payload], [child.fileno(), *fds])
        finally:
            child.close()
        return mine

    def close(self) -> None:
        self.sock.close()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_server: _Server | None = None


def _the_server(env: Mapping[str, str]) -> _Server | None:
    """This process's fork server (started now if need be), or None when ``env`` needs a real start."""
    global _server
    if not enabled():
        return None
    if _server is None or _server.pid != os.getpid() or _server.proc.poll() is not None:
        _server = _Server()
        atexit.register(_server.close)
    return _server if _server.usable_for(env) else None


def _stdio_fds(
    stdin: int | IO[Any] | None, stdout: int | IO[Any] | None, stderr: int | IO[Any] | None
) -> tuple[list[int], list[int], int | None]:
    """The three descriptors for the child, those to close here once sent, and the read end of a stderr pipe."""
    sent: list[int] = []
    to_close: list[int] = []
    stderr_read: int | None = None
    null = os.open(os.devnull, os.O_RDWR)
    to_close.append(null)
    for index, given in enumerate((stdin, stdout, stderr)):
        if given is None:
            sent.append(index)  # inherited, as subprocess does
        elif given == DEVNULL:
            sent.append(null)
        elif given == STDOUT:
            sent.append(sent[1])
        elif given == PIPE:
            if index != 2:
                raise NotImplementedError("the fork server pipes stderr only")
            stderr_read, write = os.pipe()
            sent.append(write)
            to_close.append(write)
        elif isinstance(given, int):
            sent.append(given)
        else:
            sent.append(given.fileno())
    return sent, to_close, stderr_read


class _Child:
    """A forked child as the test sees it: its pid, then its exit status, on ``conn`` (closed with the status)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buffer = b""
        self.returncode: int | None = None
        self.ended: list[Callable[[], None]] = []
        """Called once the exit status is known."""
        self._pid: int | None = None

    def feed(self, data: bytes) -> None:
        """Takes what the server sent: ``pid N``, then ``exit STATUS``."""
        if not data:
            self.conn.close()
            raise RuntimeError("the fork server is gone")
        self.buffer += data
        while b"\n" in self.buffer and self.returncode is None:
            line, self.buffer = self.buffer.split(b"\n", 1)
            word, _, value = line.decode().partition(" ")
            if word == "pid":
                self._pid = int(value)
            elif word == "exit":
                self.returncode = int(value)
                self.conn.close()
                for call in self.ended:
                    call()
            else:
                raise RuntimeError(f"the fork server said {line!r}")

    def read(self, *, timeout: float | None) -> bool:
        """Reads what the server sent within ``timeout`` seconds (0: what has come); False if nothing came."""
        if self.returncode is not None:
            return False
        self.conn.settimeout(timeout)
        try:
            data = self.conn.recv(4096)
        except (BlockingIOError, TimeoutError):
            return False
        self.feed(data)
        return True

    @property
    def pid(self) -> int:
        while self._pid is None:
            self.read(timeout=None)
        return self._pid

    def poll(self) -> int | None:
        """The exit status if the child has ended, else None (does not wait)."""
        while self.read(timeout=0):
            pass
        return self.returncode

    def signal(self, sig: int) -> None:
        """``sig`` to the child, unless it has ended (as ``subprocess`` does)."""
        if self.poll() is None:
            os.kill(self.pid, sig)


class _Signalled:
    """What both stand-ins share: the child's pid and its signals."""

    def __init__(self, child: _Child) -> None:
        self._child = child

    @property
    def pid(self) -> int:
        return self._child.pid

    def send_signal(self, sig: int) -> None:
        self._child.signal(sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkedProcess(_Signalled):
    """What the tests use of ``asyncio.subprocess.Process``, for a child of the fork server."""

    def __init__(self, child: _Child, stderr: asyncio.StreamReader | None) -> None:
        super().__init__(child)
        self._exited: asyncio.Future[int] | None = None
        self.stderr = stderr
        self.stdin = None
        self.stdout = None

    @property
    def returncode(self) -> int | None:
        return self._child.poll()

    async def wait(self) -> int:
        """Waits for the child to end; its exit status (several may wait at once)."""
        loop = asyncio.get_running_loop()
        child = self._child
        code = child.poll()
        if code is not None:
            return code
        if self._exited is None or self._exited.get_loop() is not loop or self._exited.done():
            exited: asyncio.Future[int] = loop.create_future()
            fd = child.conn.fileno()

            def ended() -> None:
                loop.remove_reader(fd)
                if not exited.done():
                    exited.set_result(child.returncode if child.returncode is not None else -1)

            def readable() -> None:
                try:
                    child.read(timeout=0)
                except (OSError, RuntimeError) as exc:
                    loop.remove_reader(fd)
                    if not exited.done():
                        exited.set_exception(exc)

            child.ended.append(ended)
            loop.add_reader(fd, readable)
            self._exited = exited
        return await asyncio.shield(self._exited)


class ForkedPopen(_Signalled):
    """What the tests use of ``subprocess.Popen``, for a child of the fork server."""

    def __init__(self, child: _Child, args: list[str]) -> None:
        super().__init__(child)
        self.args = args

    @property
    def returncode(self) -> int | None:
        return self._child.returncode

    def poll(self) -> int | None:
        return self._child.poll()

    def wait(self, timeout: float | None = None) -> int:
        child = self._child
        deadline = None if timeout is None else time.monotonic() + timeout
        while child.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            child.read(timeout=left)
        assert child.returncode is not None
        return child.returncode


def _fork(
    module: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | str,
    stdin: int | IO[Any] | None,
    stdout: int | IO[Any] | None,
    stderr: int | IO[Any] | None,
) -> tuple[_Child, int | None] | None:
    server = _the_server(env)
    if server is None:
        return None
    fds, to_close, stderr_read = _stdio_fds(stdin, stdout, stderr)
    try:
        conn = server.request(module, args, env, cwd, fds)
    except BaseException:
        if stderr_read is not None:
            os.close(stderr_read)
        raise
    finally:
        for fd in to_close:
            os.close(fd)
    return _Child(conn), stderr_read


def _stream_of(fd: int, loop: asyncio.AbstractEventLoop) -> asyncio.StreamReader:
    """A ``StreamReader`` fed from the read end ``fd`` of a pipe, closed at its end of file."""
    reader = asyncio.StreamReader(loop=loop)
    os.set_blocking(fd, False)

    def readable() -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError as exc:
            reader.set_exception(exc)
            data = b""
        if data:
            reader.feed_data(data)
            return
        loop.remove_reader(fd)
        os.close(fd)
        reader.feed_eof()

    loop.add_reader(fd, readable)
    return reader


async def spawn_async(
    module: str,
    *args: str,
    env: Mapping[str, str],
    cwd: Path | str,
    stdin: int | IO[Any] | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
) -> ForkedProcess | asyncio.subprocess.Process:
    """``python -m module args`` as ``asyncio.create_subprocess_exec`` would start it, from the fork server."""
    forked = _fork(module, args, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr)
    if forked is None:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, *args, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env
        )
    child, stderr_read = forked
    loop = asyncio.get_running_loop()
    process = ForkedProcess(child, _stream_of(stderr_read, loop) if stderr_read is not None else None)
    child.conn.setblocking(False)
    while child._pid is None:  # started (as create_subprocess_exec returns once the process is)
        child.feed(await loop.sock_recv(child.conn, 4096))
    return process


def spawn_popen(
    module: str,
    *args: str,
    env: Mapping[str, str],
    cwd: Path | str,
    stdin: int | IO[Any] | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
) -> ForkedPopen | subprocess.Popen[bytes]:
    """``python -m module args`` as ``subprocess.Popen`` would start it (no pipes), from the fork server."""
    if PIPE in (stdin, stdout, stderr):
        raise NotImplementedError("spawn_popen takes no pipes")
    argv = [sys.executable, "-m", module, *args]
    forked = _fork(module, args, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr)
    if forked is None:
        return subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=dict(env))
    child, _ = forked
    popen = ForkedPopen(child, argv)
    popen.pid  # noqa: B018 (started, as Popen returns once the process is)
    return popen


# --- the server's side -------------------------------------------------------------------------------------------


def _stdio(env: Mapping[str, str], encoding: Sequence[tuple[str, str]]) -> None:
    """``sys.stdin``, ``sys.stdout``, ``sys.stderr`` made again on descriptors 0, 1, 2, as an interpreter started
    with ``env`` makes them (``PYTHONUNBUFFERED``: written through; else line-buffered on a terminal, and stderr
    always)."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    made: list[io.TextIOWrapper] = []
    for fd, (enc, errors) in enumerate(encoding):
        tty = os.isatty(fd)
        if fd == 0:
            stream = open(0, "rb", closefd=False)  # noqa: SIM115 (sys.stdin, for the life of the process)
            made.append(io.TextIOWrapper(stream, encoding=enc, errors=errors, line_buffering=tty))
            continue
        raw: Any = open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)  # noqa: SIM115 (the same)
        made.append(
            io.TextIOWrapper(
                raw,
                encoding=enc,
                errors=errors,
                line_buffering=not unbuffered and (tty or fd == 2),
                write_through=unbuffered,
            )
        )
    sys.stdin = sys.__stdin__ = made[0]  # type: ignore[misc]
    sys.stdout = sys.__stdout__ = made[1]  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = made[2]  # type: ignore[misc]


def _exit_status(code: object) -> int:
    """The exit status of ``sys.exit(code)``, its message printed as the interpreter does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _child(
    request: dict[str, Any], fds: list[int], handlers: dict[int, Any], encoding: Sequence[tuple[str, str]]
) -> None:
    """In the forked child: become ``python -m MODULE ARGS`` and exit; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for number, handler in handlers.items():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(number, handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)  # dup2 makes 0, 1, 2 inheritable, as they are in a started process
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        env: dict[str, str] = request["env"]
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(env)
        sys.path[0] = os.getcwd()
        _stdio(env, encoding)
        module: str = request["module"]
        sys.argv = [module, *request["args"]]  # runpy sets argv[0] to the module's file, as -m does
        try:
            with warnings.catch_warnings():  # runpy's: the module was imported here before (PRELOAD), not in python -m
                warnings.filterwarnings("ignore", "'.*' found in sys.modules after import", RuntimeWarning)
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = _exit_status(exc.code)
        except KeyboardInterrupt:
            code = -signal.SIGINT
        except BaseException:
            traceback.print_exc()
            code = 1
        if os.environ.get(REPORT):
            with open(os.environ[REPORT], "a") as report:
                report.write(" ".join([module, *request["args"][:1], *sorted(set(sys.modules) - _preloaded)]) + "\n")
        threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter does at exit: join threads
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        if code < 0:  # ended by an unhandled Ctrl-C: the interpreter kills itself with SIGINT
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
            code = 128 - code
    finally:
        os._exit(code)


class _ForkServer:
    """The server's loop: requests on ``control``, exit statuses on each request's connection."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.selector = selectors.DefaultSelector()
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)
        self.children: dict[int, socket.socket] = {}
        self.handlers: dict[int, Any] = {
            n: signal.getsignal(n) for n in signal.valid_signals() if signal.getsignal(n) is not None
        }
        self.encoding = [(s.encoding, s.errors or "strict") for s in (sys.stdin, sys.stdout, sys.stderr)]

    def serve(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the children; the server ends with pytest
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_write)
        self.selector.register(self.control, selectors.EVENT_READ, "control")
        self.selector.register(self.wake_read, selectors.EVENT_READ, "wake")
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
        while True:
            for key, _ in self.selector.select(timeout=1.0):
                if key.data == "parent" and not os.read(sys.stdin.fileno(), 4096):
                    return self.stop()
                if key.data == "wake":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_read, 4096)
                if key.data == "control" and not self.take():
                    return self.stop()
            self.reap()

    def take(self) -> bool:
        """Forks for one request; False when the test process closed its end."""
        payload, fds, _, _ = socket.recv_fds(self.control, 1 << 20, 4)
        if not payload:
            return False
        conn = socket.socket(fileno=fds[0])
        stdio = fds[1:]
        pid = os.fork()
        if pid == 0:
            conn.close()
            self._forget()
            _child(json.loads(payload), stdio, self.handlers, self.encoding)
        for fd in stdio:
            os.close(fd)
        self.children[pid] = conn
        with contextlib.suppress(OSError):
            conn.sendall(f"pid {pid}\n".encode())
        return True

    def _forget(self) -> None:
        """In a child: close what is the server's."""
        self.selector.close()
        self.control.close()
        for conn in self.children.values():
            conn.close()
        os.close(self.wake_read)
        os.close(self.wake_write)
        sys.stdin.close()

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()

    def stop(self) -> None:
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while self.children:
            pid, _ = os.waitpid(-1, 0)
            conn = self.children.pop(pid, None)
            if conn is not None:
                conn.close()


_preloaded: set[str] = set()


def serve(control_fd: int) -> None:
    """``python -m tests.fork_server FD``: import ``PRELOAD``, then serve on the socket ``FD``."""
    server = _ForkServer(socket.socket(fileno=control_fd))  # the fresh interpreter's handlers, before any change
    for name in PRELOAD:
        __import__(name)
    _preloaded.update(sys.modules)
    if threading.active_count() != 1:
        raise RuntimeError(f"the preloaded modules started threads: {threading.enumerate()}")
    server.serve()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
