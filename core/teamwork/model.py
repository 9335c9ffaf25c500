"""A task one bot hands to another: the context it runs in on the bot that takes it, the input that carries it and
the answer that comes back."""

from __future__ import annotations

from dataclasses import dataclass

import pydantic

from ..definitions import context
from ..entries import InputRef
from ..trust.tiers import TIER_PARAM

__all__ = ("ANSWER_OUTPUT", "TASK_INPUT", "Answer", "TaskArgs", "task_context", "task_input")

TASK_INPUT = "task"
"""The type of the input a task arrives as."""
ANSWER_OUTPUT = "task:answer"
"""The output the bot that takes a task answers it with."""


class TaskArgs(pydantic.BaseModel):
    """The instance of a task: one conversation per task."""

    id: str = pydantic.Field(pattern=r"^[0-9a-f]{32}$")


task_context = context(
    type="task",
    schema=TaskArgs,
    key=lambda a: a.id,
    instructions="A task another bot handed to you: answer it once, completely, with the task:answer output (the "
    "other bot reads only that); no chat is there to post in.",
    keep_logs=40,
    max_working_memory=40,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What came back for a task."""

    text: str
    """The answer (empty with ``error``)."""
    input_tokens: int = 0
    output_tokens: int = 0
    """Tokens the bot that answered spent on it (charged to whoever asked)."""
    error: str | None = None
    """Why there is no answer (its token budget spent, the run failed)."""

    def dump(self) -> str:
        """As stored."""
        import json

        return json.dumps(
            {"t": self.text, "i": self.input_tokens, "o": self.output_tokens, "e": self.error}, ensure_ascii=False
        )

    @classmethod
    def load(cls, raw: str) -> Answer:
        """From ``dump``."""
        import json

        found = json.loads(raw)
        return cls(
            text=str(found.get("t") or ""),
            input_tokens=int(found.get("i") or 0),
            output_tokens=int(found.get("o") or 0),
            error=found.get("e"),
        )


def task_input(*, task: str, caller: str, depth: int, budget: int, asker: str | None, tier: str | None) -> InputRef:
    """The input that hands ``task`` over from the bot ``caller`` at ``depth`` (1: asked by a bot a person talks
    to), within ``budget`` tokens, on behalf of ``asker`` (``telegram:123``) with their ``tier``."""
    params = {"user": f"bot {caller}", "caller": caller, "depth": str(depth), "budget": str(budget)}
    if asker:
        platform, _, user = asker.partition(":")
        params.update(platform=platform, user_id=user)
    if tier:
        params[TIER_PARAM] = tier
    return InputRef(
        type=TASK_INPUT,
        data={"task": task, "caller": caller, "depth": depth},
        params=params,
        text=f"The bot {caller} hands you this task. Answer it with the task:answer output.\n{task}",
    )
