"""The correlation id: which incoming message the current work is for.

A chat adapter sets it when a message arrives; ``Agent.send`` stamps it on the input, a queue carries it
with the input, and the run that handles the input (in this process or a worker) sets it again, so every
log line from the message to the reply can carry the same id.
"""

from __future__ import annotations

import contextvars

__all__ = ("correlation_id",)

correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("correlation_id", default=None)
"""The id of the message being handled (``None`` outside of one)."""
