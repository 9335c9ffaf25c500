"""A model for the usage tests: answers every call at once, and reports its tokens as a provider does."""

from __future__ import annotations

from collections.abc import AsyncIterator

from core import ModelRequest
from core.models.base import ModelUsage, report_usage

TOKENS_IN, TOKENS_OUT = 1000, 5
ROOM_REPLY = '<response><output type="room:message">ok</output></response>'


class Answers:
    """Answers every call with ``reply`` (a word in the ``room`` context), then reports ``tokens_in`` and
    ``tokens_out``."""

    name = model = "answers"
    vision = False
    last_usage = None

    def __init__(self, reply: str = ROOM_REPLY, *, tokens_in: int = TOKENS_IN, tokens_out: int = TOKENS_OUT) -> None:
        self.reply, self.tokens_in, self.tokens_out = reply, tokens_in, tokens_out

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        yield self.reply
        report_usage(ModelUsage(input_tokens=self.tokens_in, output_tokens=self.tokens_out))
