"""Where the answer to a task waits for the bot that asked: this process's memory (two bots in one process) or
Redis (``core.teamwork.fleet``: a bot's workers answer, another bot's worker waits)."""

from __future__ import annotations

import asyncio
from typing import Protocol

from .model import Answer

__all__ = ("AnswerBox", "MemoryAnswerBox")


class AnswerBox(Protocol):
    """Answers to tasks, by task id."""

    async def put(self, task_id: str, answer: Answer) -> None:
        """The task's answer (the first one counts)."""
        ...

    async def wait(self, task_id: str, timeout: float) -> Answer | None:
        """The task's answer, waited for at most ``timeout`` seconds (None: none came)."""
        ...


class MemoryAnswerBox:
    """An ``AnswerBox`` in this process's memory."""

    def __init__(self) -> None:
        self._answers: dict[str, asyncio.Future[Answer]] = {}

    def _future(self, task_id: str) -> asyncio.Future[Answer]:
        found = self._answers.get(task_id)
        if found is None:
            found = self._answers[task_id] = asyncio.get_running_loop().create_future()
        return found

    async def put(self, task_id: str, answer: Answer) -> None:
        future = self._future(task_id)
        if not future.done():
            future.set_result(answer)

    async def wait(self, task_id: str, timeout: float) -> Answer | None:
        future = self._future(task_id)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return None
        finally:
            self._answers.pop(task_id, None)
