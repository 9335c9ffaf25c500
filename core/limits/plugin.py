"""The limits plugin: an input over a per-user or per-conversation limit is taken out before the model reads it,
and its author told once per window (admin users pass)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..entries import InputRef, Log
from ..plugin import Plugin, RunHooks, RunView
from ..prompt import format_value
from ..usage import user_of
from . import Limiter

if TYPE_CHECKING:
    from ..usage import UsageStore

__all__ = ("Limits",)

log = logging.getLogger("core.limits")


class Limits(Plugin):
    """Checks each input against ``limiter`` before the model reads it; the per-day token limits read ``usage``
    (default: the agent's, the store of its ``core.usage.plugin.Usage``)."""

    name = "limits"

    def __init__(self, limiter: Limiter, *, usage: UsageStore | None = None) -> None:
        self.limiter = limiter
        """The limits and their counters."""
        self.usage = usage
        """Today's tokens per user and conversation (None: the agent's)."""

    def begin(self, run: RunView) -> RunHooks | None:
        return _Admit(self, run) if self.limiter.config.active else None


class _Admit(RunHooks):
    __slots__ = ("plugin", "run")

    def __init__(self, plugin: Limits, run: RunView) -> None:
        self.plugin = plugin
        self.run = run

    async def admit(self, updates: list[Log]) -> list[Log]:
        limiter, run = self.plugin.limiter, self.run
        state = run.state
        admitted: list[Log] = []
        for entry in updates:
            if not isinstance(entry, InputRef):
                admitted.append(entry)
                continue
            text = entry.text if entry.text is not None else format_value(entry.data)
            usage = self.plugin.usage if self.plugin.usage is not None else run.host.usage
            refusal = await limiter.check(entry, conversation=state.id, text=text, usage=usage)
            if refusal is None:
                admitted.append(entry)
                continue
            entry.processed = True
            logs = state.working_memory.logs
            if entry in logs:
                logs.remove(entry)
            run.observe(f"limited:{refusal.kind.value}")
            log.info("%s: an input of %s is over the %s limit", state.id, user_of(entry), refusal.kind.value)
            if await limiter.notice_due(refusal):
                try:
                    await run.say(refusal.notice)
                except Exception as exc:
                    log.warning("could not tell %s that a limit was reached: %s", state.id, exc)
        return admitted
