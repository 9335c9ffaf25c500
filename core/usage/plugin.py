"""The usage plugin: each model call's tokens and cost counted per day for the user who asked, the conversation
and the model (what ``/stats`` shows and the per-day token limits read)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..plugin import ModelCall, Plugin, RunHooks, RunView
from . import InMemoryUsage, Price, UsageStore, cost_micros, day_of

__all__ = ("Usage",)

log = logging.getLogger("core.usage")


class Usage(Plugin):
    """Counts tokens and costs in ``store`` (default: this process's memory), priced by ``prices`` (dollars per
    million tokens, by model name)."""

    name = "usage"

    def __init__(self, store: UsageStore | None = None, *, prices: Mapping[str, Price] | None = None) -> None:
        self.store: UsageStore = store if store is not None else InMemoryUsage()
        """Where the counters are kept."""
        self.prices: dict[str, Price] = dict(prices or {})
        """What each model costs, by model name."""

    def begin(self, run: RunView) -> RunHooks:
        return _Charge(self, run)


class _Charge(RunHooks):
    __slots__ = ("plugin", "run")

    def __init__(self, plugin: Usage, run: RunView) -> None:
        self.plugin = plugin
        self.run = run

    async def charged(self, call: ModelCall) -> None:
        """Add the call's tokens to the counters of the user who asked, the conversation and the model, once per
        batch and step: a batch run again after a crash charges nothing twice. A failing store is logged: the
        answer is on its way."""
        run, name = self.run, call.model
        state = run.state
        cost = cost_micros(self.plugin.prices.get(name), call.input_tokens, call.output_tokens)
        if cost and not call.estimated:
            run.observe(f"cost_micros:{name}", cost)
        keys = [f"chat:{state.id}", f"model:{name}"]
        if run.asker is not None:
            keys.insert(0, f"user:{run.asker}")
        batch = state.options.get("batch_id")  # the same in every attempt at a queued batch; a run in this
        # process is never repeated, so it needs no charge id (the store would keep one a call for two days)
        try:
            await self.plugin.store.add(
                day=day_of(),
                keys=keys,
                input_tokens=call.input_tokens,
                output_tokens=call.output_tokens,
                cost=cost,
                charge=f"{batch}:{run.steps}" if batch else None,
            )
        except Exception:
            log.exception("could not count the usage of %s", state.id)
