"""What happens to a message sent while the bot is working, and the quiet window that reads a burst as one turn.

``BusyPolicy`` (``AgentOptions.busy``, ``BOT_BUSY``; a chat admin may choose another for one conversation with
``/busy``, ``ChatSettings.busy``), the same in one process and in the fleet:

- ``steer``: the message joins the run in progress and the model reads it at the run's next step (the seeds' "an
  input joining an ongoing run"; the default, and what one process always did);
- ``collect``: it waits, with every other message sent meanwhile, and the run after this one answers them together
  as one turn;
- ``queue``: it waits, and gets a run of its own after this one (one run per message, in order);
- ``interrupt``: the answer being written is stopped (what it wrote is kept, marked as stopped, as a Stop does) and a
  new run answers the new message, the stopped exchange in its memory.

Before any of them: while nothing of the answer is shown yet (no output's text, no action call started), a message
that arrives joins the run and its model call is cancelled and started again with it (``Run.restart``, counted as
``model_call_restarted``), so a lone message goes to the model at once and a burst pasted or forwarded together is
still one turn; the policy decides once words are visible.

The quiet window, off by default (``AgentOptions.quiet_ms``, ``BOT_QUIET_MS``; ``AgentOptions.quiet_ms_by_context``
per kind of conversation, the terminal's 0; a chat admin may choose another with ``/quiet``, ``ChatSettings.quiet``):
a run starts only once the conversation has been quiet that long, so "hi" / "one question" / "about Redis" sent
within it are answered together. It waits at most ``QUIET_WINDOWS`` windows after the first message, so a
conversation that never pauses is still answered.
"""

from __future__ import annotations

import enum

__all__ = ("QUIET_CHAT_MAX_MS", "QUIET_WINDOWS", "BusyPolicy", "quiet_wait_ms")

QUIET_WINDOWS = 10
"""A burst is answered at most this many quiet windows after its first message, however it goes on."""
QUIET_CHAT_MAX_MS = 10_000
"""The longest quiet window a chat may choose (``/quiet``): ten seconds, so a burst waits at most 100 s."""


class BusyPolicy(enum.StrEnum):
    """What a message sent while the conversation's run goes on does."""

    STEER = "steer"
    """It joins the run in progress: the model reads it at the next step."""
    COLLECT = "collect"
    """It waits; everything sent meanwhile is answered by the next run, as one turn."""
    QUEUE = "queue"
    """It waits; each such message is answered by a run of its own, in order."""
    INTERRUPT = "interrupt"
    """The answer in progress is stopped (kept, marked), and the next run answers the new message."""


def quiet_wait_ms(*, now: int, first: int, last: int, quiet_ms: int) -> int:
    """Milliseconds still to wait before a burst whose first input came at ``first`` and newest at ``last`` (ms)
    is answered: until the conversation has been quiet ``quiet_ms``, and no later than ``QUIET_WINDOWS`` windows after
    ``first``. 0: answer now."""
    if quiet_ms <= 0:
        return 0
    return max(0, min(last + quiet_ms, first + QUIET_WINDOWS * quiet_ms) - now)
