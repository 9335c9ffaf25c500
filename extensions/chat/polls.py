"""What both chat platforms need for the polls a model posts: the polls a process posted, remembered by their id
(the newest ``KEPT``), and the text a vote becomes as the conversation's next input.

A platform tells the bot of a vote with the poll's id (Telegram's poll id, Discord's message id) and the person,
without the question or the conversation: both are remembered when the poll is posted, in the process that posted
it. In a fleet, a vote that reaches a gateway which did not post the poll is left (logged): the documented limit.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ("KEPT", "PollBook", "PollRecord", "vote_text")

KEPT = 4096
"""How many polls a process remembers: the oldest are forgotten first."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PollRecord:
    """One poll the bot posted."""

    args: Any
    """The conversation it was posted in (the platform's context arguments)."""
    question: str
    options: tuple[str, ...]
    message_id: int
    """Its message in the chat (an answer to a vote threads under it)."""


class PollBook:
    """The polls this process posted, by the platform's poll id (the newest ``KEPT``)."""

    def __init__(self) -> None:
        self._polls: OrderedDict[str, PollRecord] = OrderedDict()

    def add(self, poll_id: str, record: PollRecord) -> None:
        """Remember ``record`` under ``poll_id``."""
        self._polls[poll_id] = record
        while len(self._polls) > KEPT:
            self._polls.popitem(last=False)

    def get(self, poll_id: str) -> PollRecord | None:
        """The poll ``poll_id``, when this process posted it lately."""
        return self._polls.get(poll_id)


def vote_text(who: str, record: PollRecord, chosen: Sequence[int]) -> str:
    """What the model reads of a vote: ``Ann chose 'Tea' in the poll 'Tea or coffee?'`` (``chosen``: the options'
    positions, from 0)."""
    names = [repr(record.options[i]) for i in chosen if 0 <= i < len(record.options)]
    if not names:
        return f"{who} answered the poll {record.question!r}"
    return f"{who} chose {', '.join(names)} in the poll {record.question!r}"
