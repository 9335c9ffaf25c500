"""A cold start, measured as a person meets it: a fresh ``bots chat``, the time to its prompt, the time from a line
typed at the first prompt to the first answer, and the same for a later line (warm).

Each run starts a new process in a pseudo-terminal (the terminal chat only starts on one) with a fresh
``BOT_DATA_DIR`` (the weights where ``make run`` keeps them: the per-user cache folder, or ``LLM_WEIGHTS_DIR``),
waits for the prompt (``you> ``), types a first line, waits for the answer, types two more lines, waits for their
answers, and leaves with ``/quit``. The first answer of a fresh process is compared with warm ones: the seconds
from Enter to the first character of the answer, and to its end (the next prompt). Prints the median of ``--runs``
(5) fresh processes. The settings' model is used (the embedded model by default).

``--against DIR`` runs the code of another checkout (``git worktree add DIR COMMIT``, or ``git archive COMMIT``
unpacked in DIR) in turn with this one, A B A B, through ``PYTHONPATH``: the medians of both and the ratio of the
time to the prompt pair by pair, so a drift of a shared machine touches both alike. ``--ready-only`` stops at the
prompt (start-up alone).

Run: ``python bench/cold_start.py`` (``--runs 5``, ``--against DIR``, ``--ready-only``, ``--show`` to print what
the chat wrote).
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = b"you> "
FIRST = "What is the capital of Italy?"
LATER = ("What is the capital of France?", "What is the capital of Japan?")
"""Three lines alike, so the first answer is compared with answers of its own kind (a line about the bot itself
would be checked sentence by sentence, see ``core.models.answer_guards``, and show later)."""
TIMEOUT = 600.0


class Chat:
    """A ``bots chat`` process on a pseudo-terminal."""

    def __init__(self, data_dir: Path, *, show: bool, code: Path | None = None) -> None:
        self.show = show
        master, slave = pty.openpty()
        bots = Path(sys.executable).with_name("bots")
        env = {**os.environ, "BOT_DATA_DIR": str(data_dir), "HTTP_PORT": "0", "LOG_LEVEL": "WARNING"}
        if code is not None:  # another checkout's code, ahead of the installed one
            env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
        self.process = subprocess.Popen(
            [str(bots), "chat"], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )
        os.close(slave)
        self.fd = master
        self.seen = b""

    def until(self, marker: bytes, *, after: int) -> tuple[float | None, float]:
        """Wait until ``marker`` appears past offset ``after``: (when the first byte past ``after`` that is not an
        echo came, when the marker came)."""
        first: float | None = None
        deadline = time.monotonic() + TIMEOUT
        while marker not in self.seen[after:]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {marker!r} within {TIMEOUT:.0f}s; the chat wrote: {self.seen[-400:]!r}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if not ready:
                if self.process.poll() is not None:
                    raise RuntimeError(f"bots chat ended ({self.process.returncode}): {self.seen[-600:]!r}")
                continue
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                continue
            if self.show:
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
            self.seen += chunk
            if first is None and b"> " in self.seen[after:].split(b"\n", 1)[-1]:
                first = time.monotonic()
        return first, time.monotonic()

    def say(self, line: str) -> tuple[float, float]:
        """Type ``line``: seconds to the answer's first characters and to the next prompt."""
        after = len(self.seen)
        os.write(self.fd, line.encode() + b"\r")
        started = time.monotonic()
        # the echo of the line comes first; the answer starts after it
        echo_end = self._echoed(line, after)
        first, done = self.until(PROMPT, after=echo_end)
        return (first if first is not None else done) - started, done - started

    def _echoed(self, line: str, after: int) -> int:
        deadline = time.monotonic() + 10
        while line.encode() not in self.seen[after:] and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                self.seen += os.read(self.fd, 4096)
        found = self.seen.find(line.encode(), after)
        return found + len(line) if found >= 0 else after

    def close(self) -> None:
        try:
            os.write(self.fd, b"/quit\r")
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self.fd)


def one(
    show: bool, *, code: Path | None = None, ready_only: bool = False
) -> tuple[float, tuple[float, float], list[tuple[float, float]]]:
    """Seconds to the prompt, the first answer (first characters, end), the later answers."""
    with tempfile.TemporaryDirectory(prefix="cold-start-") as folder:
        started = time.monotonic()
        chat = Chat(Path(folder), show=show, code=code)
        try:
            chat.until(PROMPT, after=0)
            ready = time.monotonic() - started
            if ready_only:
                return ready, (0.0, 0.0), [(0.0, 0.0)]
            first = chat.say(FIRST)
            later = [chat.say(line) for line in LATER]
        finally:
            chat.close()
    return ready, first, later


def against(opts: argparse.Namespace) -> None:
    """This checkout and ``opts.against`` in turn: each one's medians, and the ratio of the time to the prompt."""
    med = statistics.median
    figures: dict[str, list[tuple[float, float, float]]] = {"this": [], "other": []}
    for number in range(opts.runs):
        for name, code in (("other", opts.against), ("this", None)):
            ready, (first, _), later = one(opts.show, code=code, ready_only=opts.ready_only)
            figures[name].append((ready, first, med([w for w, _ in later])))
            print(
                f"run {number + 1} {name}: prompt after {ready:.1f}s | first answer {first:.2f}s | warm {later[0][0]:.2f}s",
                flush=True,
            )
    for name, rows in figures.items():
        print(
            f"{name} ({opts.against if name == 'other' else 'this checkout'}), median of {opts.runs}: prompt after "
            f"{med(r for r, _, _ in rows):.2f}s; first answer {med(f for _, f, _ in rows):.2f}s, warm "
            f"{med(w for _, _, w in rows):.2f}s",
            flush=True,
        )
    ratios = [mine[0] / theirs[0] for mine, theirs in zip(figures["this"], figures["other"], strict=True)]
    print(
        f"time to the prompt, this / other, pair by pair: median {med(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--show", action="store_true")
    parser.add_argument("--against", type=Path, help="another checkout, run in turn with this one")
    parser.add_argument("--ready-only", action="store_true", help="stop at the prompt")
    opts = parser.parse_args()
    if opts.against is not None:
        against(opts)
        return
    readies, firsts, firsts_done, warms, warms_done = [], [], [], [], []
    for number in range(opts.runs):
        ready, (first, first_done), later = one(opts.show, ready_only=opts.ready_only)
        readies.append(ready)
        firsts.append(first)
        firsts_done.append(first_done)
        warms += [w for w, _ in later]
        warms_done += [d for _, d in later]
        print(
            f"run {number + 1}: prompt after {ready:.1f}s | first answer starts {first:.2f}s after Enter "
            f"(ends {first_done:.2f}s) | warm answers start {', '.join(f'{w:.2f}' for w, _ in later)}s",
            flush=True,
        )
    med = statistics.median
    print(
        f"median of {opts.runs} fresh `bots chat`: prompt after {med(readies):.1f}s; from Enter: first answer "
        f"{med(firsts):.2f}s to its first characters ({med(firsts_done):.2f}s to its end), warm answer "
        f"{med(warms):.2f}s ({med(warms_done):.2f}s)",
        flush=True,
    )


if __name__ == "__main__":
    main()
