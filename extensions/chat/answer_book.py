"""Which conversation each message the bot posted as an answer belongs to, so that a reaction on it counts as
feedback (``core.usage.feedback``). ``LocalAnswerBook`` keeps the newest answers of this process; a fleet gives the
platform ``core.fleet.RedisAnswerBook``, shared by its gateways and workers (a worker posts the answer, a gateway
receives the reaction). A message is named by its platform's key: ``telegram:<chat id>:<message id>``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

__all__ = ("KEPT", "AnswerBook", "Ephemeral", "LocalAnswerBook")

KEPT = 4096
"""How many answers a process remembers on its own: the oldest are forgotten first."""


class AnswerBook(Protocol):
    """Where the bot's answers are noted."""

    async def add(self, messages: Sequence[str], context_id: str) -> None:
        """Remember that the platform messages ``messages`` answer in ``context_id``."""
        ...

    async def get(self, message: str) -> str | None:
        """The conversation ``message`` answers in; None: not one of the answers noted."""
        ...


class LocalAnswerBook:
    """The newest ``KEPT`` answers of this process."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._answers: OrderedDict[str, str] = OrderedDict()

    async def add(self, messages: Sequence[str], context_id: str) -> None:
        for message in messages:
            self._answers[message] = context_id
        while len(self._answers) > self.kept:
            self._answers.popitem(last=False)

    async def get(self, message: str) -> str | None:
        return self._answers.get(message)


class Ephemeral(Protocol):
    """A fleet's handle on the queue's keys of a conversation kept by nothing (``core.fleet.RedisEphemeral``)."""

    async def expire(self, cid: str) -> None:
        """Let what the queue keeps of ``cid`` after its batch expire."""
        ...
