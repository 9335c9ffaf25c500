"""The limits plugin: an input over a per-user or per-conversation limit is taken out before the model reads it,
and its author told once per window (admin users pass); a model call that would send more tokens than what is
left of a day's budget is not made, and the inputs it would have answered are told why."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..entries import InputRef, Log
from ..errors import DefinitionError
from ..plugin import Plugin, RunHooks, RunView
from ..prompt import format_value
from ..usage import USAGE, InMemoryUsage, user_of
from . import LIMITER, Limiter, Refusal

if TYPE_CHECKING:
    from ..definition_types import Setup
    from ..models.base import ModelRequest
    from ..usage import UsageStore

__all__ = ("Limits",)

log = logging.getLogger("core.limits")


class Limits(Plugin):
    """Checks each input against ``limiter`` before the model reads it; the per-day token limits read ``usage``
    (default: the agent's, the store of its ``core.usage.plugin.Usage``)."""

    name = "limits"
    after = ("usage",)  # (attached after the Usage plugin, whose store the token limits read)

    def __init__(self, limiter: Limiter, *, usage: UsageStore | None = None) -> None:
        self.limiter = limiter
        """The limits and their counters."""
        self.usage = usage
        """Today's tokens per user and conversation (None: the agent's)."""
        self._uncounted = InMemoryUsage()  # (what the limits read when nothing counts tokens: none spent)

    def attach(self, host: Setup) -> None:
        """Provide the limiter; token limits with nothing counting tokens are refused here, as the agent is built,
        rather than never reached."""
        host.provide(LIMITER, self.limiter)
        cfg = self.limiter.config
        counts = self.usage is not None or host.provided(USAGE) is not None
        if (cfg.tokens_per_day_user or cfg.tokens_per_day_conversation) and not counts:
            raise DefinitionError(
                "Limits: tokens_per_day_user and tokens_per_day_conversation read the tokens the Usage plugin "
                "counts, and this agent has none: add core.usage.Usage() to its plugins (or give "
                "Limits(usage=...) a store); without it no token limit would ever be reached"
            )

    def begin(self, run: RunView) -> RunHooks | None:
        return _Admit(self, run) if self.limiter.config.active else None

    def usage_for(self, run: RunView) -> UsageStore:
        """Where the token limits read today's tokens: ``usage``, else the ``Usage`` plugin's store
        (``provided(USAGE)``), else a store nothing fills."""
        if self.usage is not None:
            return self.usage
        found = run.host.provided(USAGE)
        return found if found is not None else self._uncounted


def _estimate(request: ModelRequest) -> int:
    """The tokens a request sends, about 4 characters a token (as usage estimates a call the provider does not
    report)."""
    return (len(request.system) + len(request.prompt)) // 4


class _Admit(RunHooks):
    __slots__ = ("plugin", "run")

    def __init__(self, plugin: Limits, run: RunView) -> None:
        self.plugin = plugin
        self.run = run

    async def admit(self, updates: list[Log]) -> list[Log]:
        limiter, run = self.plugin.limiter, self.run
        state = run.state
        usage = self.plugin.usage_for(run)
        admitted: list[Log] = []
        refused: dict[tuple[str | None, str], list[Refusal]] = {}  # by author and limit: one notice for a burst
        for entry in updates:
            if not isinstance(entry, InputRef):
                admitted.append(entry)
                continue
            text = entry.text if entry.text is not None else format_value(entry.data)
            refusal = await limiter.check(entry, conversation=state.id, text=text, usage=usage)
            if refusal is None:
                admitted.append(entry)
                continue
            run.drop(entry)
            run.observe(f"limited:{refusal.kind.value}")
            log.info("%s: an input of %s is over the %s limit", state.id, user_of(entry), refusal.kind.value)
            refused.setdefault((user_of(entry), refusal.kind.value), []).append(refusal)
        for refusals in refused.values():
            if not await limiter.notice_due(refusals[0]):
                continue
            notice = refusals[0].notice
            if len(refusals) > 1:  # a burst: one short notice says how much of it was not read
                notice = f"I did not read {len(refusals)} of the messages you just sent. {notice}"
            try:
                await run.say(notice)
            except Exception as exc:
                log.warning("could not tell %s that a limit was reached: %s", state.id, exc)
        return admitted

    async def allow(self, request: ModelRequest, updates: list[Log]) -> bool:
        run, limiter = self.run, self.plugin.limiter
        state = run.state
        usage = self.plugin.usage_for(run)
        tokens = _estimate(request)
        if run.turn and all(limiter.exempt(entry) for entry in run.turn):
            return True
        refusal = await limiter.check_call(tokens=tokens, user=run.asker, conversation=state.id, usage=usage)
        if refusal is None:
            return True
        for entry in updates:  # not answered: the model never reads them, in this run or later
            if isinstance(entry, InputRef):
                run.drop(entry)
                run.observe(f"limited:{refusal.kind.value}")  # (counted per input, as the metric says)
        log.info("%s: a model call of about %d tokens is over the %s limit", state.id, tokens, refusal.kind.value)
        if await limiter.notice_due(refusal):
            try:
                await run.say(refusal.notice)
            except Exception as exc:
                log.warning("could not tell %s that a limit was reached: %s", state.id, exc)
        return False
