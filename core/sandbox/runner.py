"""Running a short program in a sandbox: bubblewrap (``bwrap``) with util-linux's ``prlimit`` and ``setpriv``.

What the program gets: a read-only ``/usr`` (the system's interpreters and libraries) and nothing else of the
machine's files (not the bot's folder, its data, ``/etc`` or ``/home``); an empty environment (``PATH`` and
``HOME`` only); a fresh folder ``/sandbox`` (its working directory) and ``/tmp``, each a tmpfs of ``folder_bytes``;
no network (a network namespace of its own with only a loopback that is down), no other process to see (a PID
namespace), no capabilities, a new session (no terminal). Its limits: ``cpu_seconds`` of CPU, ``memory_bytes`` of
address space, ``processes`` processes, files of ``folder_bytes`` at most, 64 open files; killed, with everything it
started, at ``timeout`` seconds of wall-clock time or when it writes more than ``output_bytes``.

Run as root (a container), the program runs as ``nobody`` (uid 65534): the process limit counts per user, and
root is exempt from it. Run as another user, it runs as that user in a user namespace of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from dataclasses import dataclass, field
from typing import Literal

__all__ = ("Language", "Sandbox", "SandboxLimits", "SandboxResult", "find_sandbox")

Language = Literal["python", "sh"]
"""What a program is written in."""

NOBODY = 65534


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """What a program may use."""

    timeout: float = 10.0
    """Seconds of wall-clock time before it is killed."""
    cpu_seconds: int = 10
    """Seconds of CPU time."""
    memory_bytes: int = 256 * 1024 * 1024
    """Address space (a larger allocation fails: ``MemoryError``)."""
    processes: int = 32
    """Processes and threads at once."""
    output_bytes: int = 64 * 1024
    """Standard output and error together; past it, the program is killed and its output cut."""
    folder_bytes: int = 16 * 1024 * 1024
    """Size of ``/sandbox`` and ``/tmp`` each, and of any one file."""


@dataclass(slots=True, kw_only=True)
class SandboxResult:
    """How a program ended."""

    exit_code: int | None
    """Its exit status; None when it was killed."""
    stdout: str
    stderr: str
    stopped: str | None = None
    """Why it was stopped, in words (``time limit of 10s``, ``output past 65536 bytes``), or None."""
    signal: str | None = None
    """The signal that ended it (``SIGKILL``), if one did."""
    notes: list[str] = field(default_factory=list)
    """What the limits did, read from its end (``memory limit``, ``process limit``)."""

    def as_dict(self) -> dict[str, object]:
        """What the model reads."""
        found: dict[str, object] = {"exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr}
        if self.stopped:
            found["stopped"] = self.stopped
        if self.signal:
            found["signal"] = self.signal
        if self.notes:
            found["limits"] = self.notes
        return found


INTERPRETERS: dict[Language, tuple[str, ...]] = {
    "python": ("/usr/bin/python3", "/usr/local/bin/python3"),
    "sh": ("/usr/bin/sh", "/usr/bin/dash", "/usr/bin/bash"),
}
"""Where each language's interpreter may be (under ``/usr``: the only part of the system the program sees)."""


def find_sandbox(bwrap: str = "bwrap") -> tuple[Sandbox | None, str]:
    """A ``Sandbox`` on this machine, or None and why there is none (said by ``bots config``)."""
    found = shutil.which(bwrap)
    if found is None:
        return None, f"{bwrap} is not installed (apt-get install bubblewrap)"
    tools = {name: shutil.which(name) for name in ("prlimit", "setpriv")}
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        return None, f"{', '.join(missing)} not installed (util-linux)"
    languages = {lang: next((p for p in paths if os.access(p, os.X_OK)), None) for lang, paths in INTERPRETERS.items()}
    if languages["python"] is None:
        return None, "no python3 under /usr (/usr/bin/python3 or /usr/local/bin/python3) to run programs with"
    return (
        Sandbox(
            bwrap=found,
            prlimit=tools["prlimit"] or "prlimit",
            setpriv=tools["setpriv"] or "setpriv",
            interpreters={k: v for k, v in languages.items() if v is not None},
        ),
        "",
    )


class Sandbox:
    """Runs programs under bubblewrap (``find_sandbox`` builds one for this machine; ``check`` says whether it
    works here: a container without user namespaces has none)."""

    def __init__(self, *, bwrap: str, prlimit: str, setpriv: str, interpreters: dict[Language, str]) -> None:
        self.bwrap, self.prlimit, self.setpriv = bwrap, prlimit, setpriv
        self.interpreters = interpreters
        """The languages offered and their interpreters."""
        self.as_root = os.geteuid() == 0

    async def check(self) -> str | None:
        """None when a program runs here; else why not (bubblewrap's own words, cut)."""
        try:
            result = await self.run("print(6 * 7)", limits=SandboxLimits(timeout=20))
        except OSError as exc:
            return f"bubblewrap cannot start ({exc})"
        if result.exit_code == 0 and result.stdout.strip() == "42":
            return None
        why = (result.stderr or result.stopped or "no output").strip().splitlines()
        return f"bubblewrap cannot run a program here: {(why[-1] if why else '')[:200]}"

    def command(self, language: Language, code: str, limits: SandboxLimits) -> list[str]:
        """The command that runs ``code``."""
        interpreter = self.interpreters.get(language)
        if interpreter is None:
            raise ValueError(f"no interpreter for {language!r} here; use one of {', '.join(self.interpreters)}")
        size = str(limits.folder_bytes)
        processes = limits.processes if self.as_root else limits.processes + _processes_of(os.getuid())
        cmd = [
            self.prlimit,
            f"--nproc={processes}",
            f"--as={limits.memory_bytes}",
            f"--cpu={max(1, limits.cpu_seconds)}",
            f"--fsize={limits.folder_bytes}",
            "--nofile=64",
            "--core=0",
            "--",
        ]
        if self.as_root:  # root is exempt from the process limit: the program runs as nobody
            cmd += [self.setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        cmd += [
            self.bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for name in ("bin", "sbin", "lib", "lib64", "lib32"):
            target = os.path.join("/", name)
            if os.path.islink(target):
                cmd += ["--symlink", os.readlink(target), target]
            elif os.path.isdir(target):
                cmd += ["--ro-bind", target, target]
        cmd += ["--proc", "/proc", "--dev", "/dev"]
        cmd += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/sandbox", "--chdir", "/sandbox"]
        cmd += ["--remount-ro", "/"]  # (its own root, read-only too: only /sandbox and /tmp take writes)
        cmd += ["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/sandbox"]
        cmd += ["--setenv", "LANG", "C.UTF-8", "--"]
        if language == "python":
            return [*cmd, interpreter, "-I", "-c", code]
        return [*cmd, interpreter, "-c", code]

    async def run(self, code: str, *, language: Language = "python", limits: SandboxLimits) -> SandboxResult:
        """Run ``code`` within ``limits``; how it ended."""
        cmd = self.command(language, code, limits)
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        budget = [limits.output_bytes]
        out: list[bytes] = []
        err: list[bytes] = []
        too_much = asyncio.Event()

        async def drain(stream: asyncio.StreamReader | None, into: list[bytes]) -> None:
            assert stream is not None
            while chunk := await stream.read(4096):  # (to its end: past the budget, read and dropped)
                take = chunk[: max(0, budget[0])]
                budget[0] -= len(chunk)
                if take:
                    into.append(take)
                if budget[0] < 0:
                    too_much.set()

        readers = asyncio.gather(drain(proc.stdout, out), drain(proc.stderr, err))
        ended = asyncio.ensure_future(proc.wait())
        flood = asyncio.ensure_future(too_much.wait())
        stopped: str | None = None
        try:
            done, _ = await asyncio.wait({ended, flood}, timeout=limits.timeout, return_when=asyncio.FIRST_COMPLETED)
            if flood in done and not ended.done():
                stopped = f"output past {limits.output_bytes} bytes: killed, its output cut"
            elif not done:
                stopped = f"time limit of {limits.timeout:g}s: killed"
        finally:
            flood.cancel()
            if not ended.done():
                _kill(proc.pid)
            await ended
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(readers, timeout=2.0)
            if not readers.done():
                readers.cancel()
        code_ = proc.returncode
        died = signal.Signals(-code_).name if code_ is not None and code_ < 0 else None
        result = SandboxResult(
            exit_code=None if died or stopped else code_,
            stdout=b"".join(out).decode("utf-8", "replace"),
            stderr=b"".join(err).decode("utf-8", "replace"),
            stopped=stopped,
            signal=died,
        )
        if died == "SIGXCPU" or (died == "SIGKILL" and stopped is None):
            result.notes.append(f"CPU limit of {limits.cpu_seconds}s")
        if "MemoryError" in result.stderr or "Cannot allocate memory" in result.stderr:
            result.notes.append(f"memory limit of {limits.memory_bytes // (1024 * 1024)} MB")
        if "Resource temporarily unavailable" in result.stderr or "fork" in result.stderr.lower():
            result.notes.append(f"process limit of {limits.processes}")
        if died == "SIGXFSZ" or "File too large" in result.stderr or "No space left" in result.stderr:
            result.notes.append(f"folder limit of {limits.folder_bytes // (1024 * 1024)} MB")
        return result


def _kill(pid: int) -> None:
    """Kill the sandbox: its outer process and group (the PID namespace dies with its first process)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def _processes_of(uid: int) -> int:
    """Tasks (processes and threads) of ``uid`` now: the process limit of a user counts them all."""
    count = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid == uid:
                        count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count
