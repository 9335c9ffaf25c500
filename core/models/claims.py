"""Claims between processes on work that only one of them need do (assembling the weights, warming a prompt):
an advisory lock (``flock``) on a file beside the result, held while the work is done. A process that finds the
work claimed waits for its holder, then uses the result instead of doing it again. The lock goes with the
holder's process if it dies; a holder that neither ends nor lets go is waited for at most ``wait`` seconds.

Blocking: from async code, call ``claim`` in a thread."""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ("Claim", "claim")


class Claim:
    """A process's claim on a piece of work (``claim``): held until ``release``."""

    def __init__(self, fd: int | None, *, waited: bool) -> None:
        self._fd = fd
        self.waited = waited
        """Another process held it first: what it made may be there now."""

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # (the lock goes with the descriptor)
            self._fd = None

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def claim(lock: Path, *, wait: float, on_wait: Callable[[], None] | None = None) -> Claim:
    """Claim the work ``lock`` stands for: at once when no other process holds it, else once it lets it go
    (``waited``), or after ``wait`` seconds (then done here too; ``on_wait`` is called once when waiting begins).
    Where no lock file can be made, nothing is claimed and nothing waited for."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return Claim(None, waited=False)
    deadline, waited = time.monotonic() + wait, False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return Claim(fd, waited=waited)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or time.monotonic() >= deadline:
                os.close(fd)
                return Claim(None, waited=waited)
        if not waited and on_wait is not None:
            on_wait()
        waited = True
        time.sleep(0.1)
