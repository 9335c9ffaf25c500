"""What both chat platforms need for the polls a model posts: the polls a process posted, remembered by their id
(the newest ``KEPT``), and the text a vote becomes as the conversation's next input.

A platform tells the bot of a vote with the poll's id (Telegram's poll id, Discord's message id) and the person,
without the question or the conversation: both are remembered when the poll is posted, in the process that posted
it, or in a fleet in Redis, where the gateway that receives the vote finds the poll a worker posted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .answer_book import AnswerBook, LocalAnswerBook

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
    """The polls the bot posted, by the platform's poll id, kept in an ``AnswerBook`` under ``<prefix><poll id>`` (a
    JSON record): this process's newest by default, a fleet's in Redis (``core.fleet.RedisAnswerBook``, kept as long
    as its answers), so that a vote reaching a gateway finds the poll a worker posted. ``args``: the platform's
    context arguments' class (a pydantic model), to read a record back."""

    def __init__(self, *, prefix: str, args: Any, store: AnswerBook | None = None) -> None:
        self.prefix = prefix
        self.args = args
        self.store: AnswerBook = store or LocalAnswerBook(KEPT)

    async def add(self, poll_id: str, record: PollRecord) -> None:
        """Remember ``record`` under ``poll_id``."""
        value = {
            "args": record.args.model_dump(mode="json"),
            "question": record.question,
            "options": list(record.options),
            "message_id": record.message_id,
        }
        await self.store.add([self.prefix + poll_id], json.dumps(value))

    async def get(self, poll_id: str) -> PollRecord | None:
        """The poll ``poll_id``, when the bot posted it lately (None: another bot's, or forgotten)."""
        found = await self.store.get(self.prefix + poll_id)
        if found is None:
            return None
        value = json.loads(found)
        return PollRecord(
            args=self.args.model_validate(value["args"]),
            question=value["question"],
            options=tuple(value["options"]),
            message_id=int(value["message_id"]),
        )


def vote_text(who: str, record: PollRecord, chosen: Sequence[int]) -> str:
    """What the model reads of a vote: ``Ann chose 'Tea' in the poll 'Tea or coffee?'`` (``chosen``: the options'
    positions, from 0)."""
    names = [repr(record.options[i]) for i in chosen if 0 <= i < len(record.options)]
    if not names:
        return f"{who} answered the poll {record.question!r}"
    return f"{who} chose {', '.join(names)} in the poll {record.question!r}"
