"""The usage plugin: each model call's tokens and cost counted per day for the user who asked, the conversation
and the model (what ``/stats`` shows and the per-day token limits read)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..entries import InputRef
from ..plugin import ModelCall, Plugin, RunHooks, RunView
from ..reply_ledger import BATCH
from . import CACHED, USAGE, InMemoryUsage, Price, UsageStore, cost_micros, day_of, user_of

if TYPE_CHECKING:
    from ..definition_types import Setup
    from ..entries import Log

__all__ = ("Usage",)

log = logging.getLogger("core.usage")


class Usage(Plugin):
    """Counts tokens and costs in ``store`` (default: this process's memory), priced by ``prices`` (dollars per
    million tokens, by model name); the input tokens a provider read from its prompt cache are also counted under
    the conversation's and the model's key after ``CACHED``."""

    name = "usage"

    def __init__(self, store: UsageStore | None = None, *, prices: Mapping[str, Price] | None = None) -> None:
        self.store: UsageStore = store if store is not None else InMemoryUsage()
        """Where the counters are kept."""
        self.prices: dict[str, Price] = dict(prices or {})
        """What each model costs, by model name."""

    def attach(self, host: Setup) -> None:
        host.provide(USAGE, self.store)

    async def stop(self) -> None:
        await self.store.close()

    def begin(self, run: RunView) -> RunHooks:
        return _Charge(self, run)


class _Charge(RunHooks):
    __slots__ = ("plugin", "run")

    def __init__(self, plugin: Usage, run: RunView) -> None:
        self.plugin = plugin
        self.run = run

    async def charged(self, call: ModelCall) -> None:
        """Add the call's tokens to the counters of the conversation and the model, and to those of the people it
        answers, each charged for their own messages (a call that answers several people's burst is split between
        them by the length of what each wrote), once per batch and step: a batch run again after a crash charges
        nothing twice. A failing store is logged: the answer is on its way."""
        run, name = self.run, call.model
        state = run.state
        price = self.plugin.prices.get(name)
        cost = cost_micros(price, call.input_tokens, call.output_tokens, cached_input_tokens=call.cached_input_tokens)
        if cost and not call.estimated:
            run.observe(f"cost_micros:{name}", cost)
        batch = state.values.get(BATCH)  # the same in every attempt at a queued batch; a run in this
        # process is never repeated, so it needs no charge id (the store would keep one a call for two days)
        charge = f"{batch}:{run.steps}" if batch else None
        if charge and call.cancelled:  # (a call cancelled and started again in the same step: charged apart)
            charge += f":x{call.cancelled}"
        shares = _shares(run.chain, run.asker)
        parts: list[tuple[list[str], int, int, int, str | None]] = [
            ([f"chat:{state.id}", f"model:{name}"], call.input_tokens, call.output_tokens, cost, charge)
        ]
        if call.cancelled:  # (core.busy: counted apart too, so /stats can say what the restarts cost)
            parts.append(
                ([f"cancelled:{state.id}"], call.input_tokens, call.output_tokens, cost, charge and charge + ":c")
            )
        if call.cached_input_tokens:  # (of the input tokens, those read from the provider's prompt cache)
            keys = [f"{CACHED}chat:{state.id}", f"{CACHED}model:{name}"]
            parts.append((keys, call.cached_input_tokens, 0, 0, charge and charge + ":k"))
        for user, (tokens_in, tokens_out, spent) in _split(shares, call.input_tokens, call.output_tokens, cost).items():
            parts.append(([f"user:{user}"], tokens_in, tokens_out, spent, f"{charge}:{user}" if charge else None))
        try:
            for keys, tokens_in, tokens_out, spent, charge_id in parts:
                await self.plugin.store.add(
                    day=day_of(),
                    keys=keys,
                    input_tokens=tokens_in,
                    output_tokens=tokens_out,
                    cost=spent,
                    charge=charge_id,
                )
        except Exception:
            log.exception("could not count the usage of %s", state.id)


def _shares(chain: Sequence[Log], asker: str | None) -> dict[str, int]:
    """Who the run answers, each with the length of what they wrote in it (their share of a call's tokens): the
    authors of the inputs the model has read; none read yet, ``asker``."""
    shares: dict[str, int] = {}
    for entry in chain:
        if isinstance(entry, InputRef) and entry.processed and (user := user_of(entry)) is not None:
            text = entry.text if entry.text is not None else str(entry.data or "")
            shares[user] = shares.get(user, 0) + len(text) + 1
    if not shares and asker is not None:
        shares[asker] = 1
    return shares


def _split(shares: dict[str, int], tokens_in: int, tokens_out: int, cost: int) -> dict[str, tuple[int, int, int]]:
    """``tokens_in``, ``tokens_out`` and ``cost`` divided in proportion to ``shares``, in whole numbers that add up
    to them (the remainders go to the largest shares first)."""
    total = sum(shares.values())
    if not total:
        return {}

    def divide(amount: int) -> list[int]:
        exact = [amount * w / total for w in shares.values()]
        whole = [int(x) for x in exact]
        order = sorted(range(len(exact)), key=lambda i: exact[i] - whole[i], reverse=True)
        for i in order[: amount - sum(whole)]:
            whole[i] += 1
        return whole

    return dict(zip(shares, zip(divide(tokens_in), divide(tokens_out), divide(cost), strict=True), strict=True))
