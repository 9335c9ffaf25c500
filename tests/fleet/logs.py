"""What the log of a stopped process must not say: a model stream or a task that a cancelled run left behind
(asyncio reports them when they are collected, or when the event loop closes)."""

from __future__ import annotations

from pathlib import Path

__all__ = ("LEFT_BEHIND", "assert_nothing_left_behind", "left_behind")

LEFT_BEHIND = (
    "aclose(): asynchronous generator is already running",
    "error occurred during closing of asynchronous generator",
    "was never awaited",
    "Task was destroyed but it is pending",
)
"""asyncio's words for an async generator closed too late, a coroutine never awaited, a task never finished."""


def left_behind(text: str) -> list[str]:
    """The lines of ``text`` that report something left behind."""
    return [line for line in text.splitlines() if any(words in line for words in LEFT_BEHIND)]


def assert_nothing_left_behind(logs: list[Path]) -> None:
    """Fail, quoting the lines, if a log in ``logs`` reports something left behind."""
    found = {str(log): left_behind(log.read_text(errors="replace")) for log in logs if log.exists()}
    found = {log: lines for log, lines in found.items() if lines}
    assert not found, f"a process left a stream or task behind: {found}"
