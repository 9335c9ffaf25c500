"""Enforcement in the step loop: a run acts with the tier of the least trusted author of its inputs; each step
offers the model only the actions that tier may call, and a call it may not make never runs.

``Trust`` is the agent's configuration (``create_agent(plugins=[TrustGuard(trust)])``, ``core.trust.plugin``;
without it every action is offered to everyone, as a framework without a policy does). Each run holds a ``RunGuard``
that reads the tier of every input joining it (``admit``), filters each step's actions (``offered``: one cached
lookup per action) and remembers which names it hid, so a call of one of them gets an error the model can explain
instead of "unknown action"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..slots import Slot
from .policy import ActionsPolicy, Permission, Verdict, address_of
from .tiers import Tier, tier_of

if TYPE_CHECKING:
    from ..definition_types import Action
    from ..entries import InputRef
    from .approvals import Approvals

__all__ = ("TRUST", "Notice", "RunGuard", "Trust", "english_notice")

TRUST: Slot[Trust] = Slot("trust")
"""The trust settings the ``TrustGuard`` plugin applies (``agent.provided(TRUST)``; None: every action is offered to
everyone); the approvals extension hands them its desk (``Trust.approvals``)."""

Notice = Callable[[str | None, str, Tier, Tier | None], str]
"""``notice(language, action, tier, needed)``: what the user is told when a call of ``action`` is refused (``needed``
None: nobody may call it)."""


def english_notice(language: str | None, action: str, tier: Tier, needed: Tier | None) -> str:
    """The notice when no translation is given (``bots`` gives the chat's language, ``extensions.chat.i18n``)."""
    if needed is None:
        return f"⛔ I did not use {action}: nobody may use it here."
    return f"⛔ I did not use {action}: it is for the {needed.value} tier and above here, and you are {tier.value}."


@dataclass(kw_only=True)
class Trust:
    """The agent's trust settings."""

    policy: ActionsPolicy = field(default_factory=ActionsPolicy)
    """Who may call what (``ACTIONS_POLICY``)."""
    default_tier: Tier = Tier.MEMBER
    """The tier of an input that carries none (the terminal, a schedule, another extension's input)."""
    owners: frozenset[str] = frozenset()
    """Platform-qualified user ids of the owners (``BOT_ADMIN_USERS``): an input without a tier from one of them
    is the owner's."""
    notice: Notice = english_notice
    """What the user is told when a call is refused, in the chat's language."""
    approvals: Approvals | None = None
    """Where a call whose rule says ``approve`` is handed (``Trust.approvals``); None: such calls are refused."""
    _offers: dict[tuple[str, tuple[int, ...]], tuple[list[Action[Any]], dict[str, Permission]]] = field(
        default_factory=dict, repr=False
    )

    def offer(self, tier: Tier, actions: list[Action[Any]]) -> tuple[list[Action[Any]], dict[str, Permission]]:
        """Of ``actions``, those ``tier`` may call (or ask approval for), and the others' permissions by name;
        computed once per tier and set of actions (kept with the actions, so their ids stay theirs)."""
        key = (tier._value_, tuple(map(id, actions)))
        known = self._offers.get(key)
        if known is not None:
            return known
        policy, rank = self.policy, tier.rank
        shown: list[Action[Any]] = []
        hidden: dict[str, Permission] = {}
        for action in actions:
            permission = policy.permission(action.address or action.name)
            if permission.refuses(rank):
                hidden[action.name] = permission
            else:
                shown.append(action)
        if len(self._offers) >= _OFFERS_KEPT:
            self._offers.clear()
        self._offers[key] = known = (shown, hidden)
        return known


_OFFERS_KEPT = 256
"""Distinct (tier, actions) filters kept; more clear the lot (the actions offered change rarely)."""


class RunGuard:
    """The trust decisions of one run."""

    __slots__ = ("hidden", "notified", "tier", "trust")

    def __init__(self, trust: Trust) -> None:
        self.trust = trust
        """The agent's trust settings (as the run started)."""
        self.tier: Tier | None = None
        """The least trusted tier among the authors of the run's inputs (None before the first input)."""
        self.hidden: dict[str, Permission] = {}
        """Actions of the last step the tier may not call, by name (not shown to the model)."""
        self.notified: set[str] = set()
        """Actions whose refusal the user was already told about in this run."""

    @property
    def acting(self) -> Tier:
        """The tier the run acts with."""
        return self.tier if self.tier is not None else self.trust.default_tier

    def admit(self, ref: InputRef) -> None:
        """An input joined the run: the run acts with the lower of its author's tier and the tier so far."""
        tier = tier_of(ref, default=self.trust.default_tier, owners=self.trust.owners)
        if self.tier is None or not tier.at_least(self.tier):
            self.tier = tier

    def offered(self, actions: list[Action[Any]]) -> list[Action[Any]]:
        """Of ``actions`` (a step's, from ``Host.available``), those the run's tier may call or ask approval for;
        the others are remembered in ``hidden`` (``Trust.offer``: the same actions at the same tier are filtered
        once for every run)."""
        shown, self.hidden = self.trust.offer(self.acting, actions)
        return shown

    def verdict(self, action: Action[Any]) -> Verdict:
        """What happens to a call of ``action`` now."""
        return self.trust.policy.verdict(address_of(action), self.acting)
