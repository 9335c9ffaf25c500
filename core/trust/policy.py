"""Which tier may call which action, and whether a call waits for an approval: the operator's policy.

Every action has an address: its name (``remember``, an author's ``open_ticket``), or for an MCP tool
``mcp:<server>:<tool>`` (``Action.address``). A rule gives a pattern of addresses (``*``, ``?`` and ``[...]``
wildcards, matched case-sensitively; ``*`` also crosses ``:``) a minimum tier, or ``off`` (nobody), and a rule:
``allow`` (the call runs) or ``approve`` (the call waits until an approver accepts it). The policy is written
(``ACTIONS_POLICY``, inline or the path of a file) as a JSON object::

    {"mcp:*": "admin", "mcp:tickets:open": {"tier": "member", "rule": "approve"}, "remember": "guest"}

or as compact ``pattern=tier[/rule]`` items separated by commas or new lines::

    mcp:*=admin, mcp:tickets:open=member/approve, remember=guest, mcp:shell:*=off

For an address, the operator's rules are searched first: an exact pattern wins, then the wildcard pattern with the
most characters that are not wildcards (a tie: the later one). Where none matches, the defaults apply: MCP tools
(``mcp:*``) are open to admins, a skill's scripts (``skill:*``) to members once an admin approved the call, every
other action to members with no approval.
"""

from __future__ import annotations

import enum
import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .tiers import Tier

if TYPE_CHECKING:
    from ..definition_types import Action

__all__ = ("DEFAULT_RULES", "ActionsPolicy", "Permission", "PolicyRule", "Rule", "Verdict", "address_of")

_WILDCARDS = re.compile(r"[*?\[\]]")
OFF = "off"
"""The tier word of a rule that lets nobody call the action."""


class Rule(enum.StrEnum):
    """What happens to a call its author's tier permits."""

    ALLOW = "allow"
    """It runs."""
    APPROVE = "approve"
    """It waits for an approver's press (``core.trust.Approvals``), and runs only once approved."""


class Verdict(enum.StrEnum):
    """What happens to one call by one author."""

    ALLOW = "allow"
    """It runs."""
    APPROVE = "approve"
    """It is handed to the approvals (refused while no approvals are set up)."""
    REFUSE = "refuse"
    """It never runs: the author's tier is below the action's minimum (it is not shown to the model either)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PolicyRule:
    """One line of the policy."""

    pattern: str
    """The addresses it covers (``mcp:github:*``, ``remember``, ``*``)."""
    tier: Tier | None
    """The least trusted tier that may call them; None: nobody (``off``)."""
    rule: Rule = Rule.ALLOW
    """``allow`` or ``approve``."""

    @property
    def specificity(self) -> tuple[int, int]:
        """How closely the pattern names an address: (1 for an exact name, characters that are not wildcards)."""
        exact = _WILDCARDS.search(self.pattern) is None
        return (1 if exact else 0, len(_WILDCARDS.sub("", self.pattern)))

    def matches(self, address: str) -> bool:
        """True when the pattern covers ``address``."""
        return fnmatch.fnmatchcase(address, self.pattern)

    def describe(self) -> str:
        """``pattern=tier[/approve]``, the compact form."""
        tier = self.tier.value if self.tier is not None else OFF
        return f"{self.pattern}={tier}" + ("/approve" if self.rule is Rule.APPROVE else "")


DEFAULT_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(pattern="*", tier=Tier.MEMBER),
    PolicyRule(pattern="mcp:*", tier=Tier.ADMIN),
    PolicyRule(pattern="skill:*", tier=Tier.MEMBER, rule=Rule.APPROVE),
)
"""What applies where the operator wrote nothing: actions open to members, MCP tools to admins, a skill's scripts
(``skill:<skill>:<script>``) to members once an admin approved each call."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Permission:
    """What the policy says about one address."""

    address: str
    """The action's address."""
    tier: Tier | None
    """The least trusted tier that may call it (None: nobody)."""
    rule: Rule
    """``allow`` or ``approve``."""
    source: str
    """The rule that decided, in the compact form, ``(default)`` marked."""

    def verdict(self, tier: Tier) -> Verdict:
        """What happens to a call by an author of ``tier``."""
        if self.tier is None or not tier.at_least(self.tier):
            return Verdict.REFUSE
        return Verdict.APPROVE if self.rule is Rule.APPROVE else Verdict.ALLOW

    def refuses(self, rank: int) -> bool:
        """True when an author of ``rank`` (``Tier.rank``) may not call it."""
        return self.tier is None or rank < self.tier.rank


def address_of(action: Action[Any]) -> str:
    """The address a policy names ``action`` by: ``Action.address`` (``mcp:<server>:<tool>``), else its name."""
    return action.address or action.name


class ActionsPolicy:
    """The operator's rules over the defaults; ``permission(address)`` is computed once per address."""

    def __init__(self, rules: Iterable[PolicyRule] = (), *, defaults: Iterable[PolicyRule] = DEFAULT_RULES) -> None:
        self.rules = tuple(rules)
        """The operator's rules, in the order written."""
        self.defaults = tuple(defaults)
        """What applies where no rule of the operator matches."""
        self._known: dict[str, Permission] = {}

    def permission(self, address: str) -> Permission:
        """What the policy says about ``address`` (cached: a policy does not change while it is used)."""
        known = self._known.get(address)
        if known is None:
            known = self._known[address] = self._decide(address)
        return known

    def verdict(self, address: str, tier: Tier) -> Verdict:
        """What happens to a call of ``address`` by an author of ``tier``."""
        return self.permission(address).verdict(tier)

    def _decide(self, address: str) -> Permission:
        for rules, mark in ((self.rules, ""), (self.defaults, " (default)")):
            best: PolicyRule | None = None
            for rule in rules:
                if rule.matches(address) and (best is None or rule.specificity >= best.specificity):
                    best = rule
            if best is not None:
                return Permission(address=address, tier=best.tier, rule=best.rule, source=best.describe() + mark)
        return Permission(address=address, tier=None, rule=Rule.ALLOW, source="(no rule matches)")

    def describe(self) -> list[str]:
        """Every rule in the compact form, the operator's then the defaults (``bots config``)."""
        return [r.describe() for r in self.rules] + [f"{r.describe()} (default)" for r in self.defaults]

    @property
    def approvals_needed(self) -> bool:
        """True when some rule of the operator says ``approve``."""
        return any(r.rule is Rule.APPROVE for r in self.rules)

    @classmethod
    def parse(cls, text: str) -> ActionsPolicy:
        """The policy written in ``text``: a JSON object, or compact ``pattern=tier[/rule]`` items separated by
        commas or new lines (``#`` starts a comment line). ``ValueError`` saying what to fix."""
        text = text.strip()
        if not text:
            return cls()
        if text.startswith("{"):
            try:
                data = json.loads(text, object_pairs_hook=lambda pairs: dict(_once(pairs)))
            except json.JSONDecodeError as exc:
                raise ValueError(f"the policy is not valid JSON: {exc}") from None
            if not isinstance(data, Mapping):
                raise ValueError("the policy must be a JSON object of pattern: tier")
            return cls(_rule(str(k), v) for k, v in data.items())
        items = [i.strip() for line in text.splitlines() if not line.lstrip().startswith("#") for i in line.split(",")]
        rules = []
        for item in filter(None, items):
            pattern, sep, value = item.partition("=")
            if not sep or not pattern.strip():
                raise ValueError(
                    f"{item!r} is not a policy item; write pattern=tier or pattern=tier/approve, for example "
                    "mcp:*=admin or mcp:tickets:open=member/approve"
                )
            tier, _, rule = value.partition("/")
            rules.append(_rule(pattern.strip(), {"tier": tier, "rule": rule or Rule.ALLOW.value}))
        _once([(r.pattern, r) for r in rules])
        return cls(rules)


def _once(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``pairs`` if no pattern is given twice (which one would win is not what the operator meant)."""
    seen: set[str] = set()
    for pattern, _ in pairs:
        if pattern in seen:
            raise ValueError(f"{pattern!r} is given twice: keep one rule per pattern")
        seen.add(pattern)
    return pairs


def _rule(pattern: str, value: Any) -> PolicyRule:
    if isinstance(value, str):
        value = {"tier": value}
    if not isinstance(value, Mapping) or set(value) - {"tier", "rule"}:
        raise ValueError(
            f"the rule of {pattern!r} must be a tier name or an object with tier and rule, for example "
            '{"tier": "admin", "rule": "approve"}'
        )
    tier_text = str(value.get("tier", Tier.MEMBER.value)).strip().lower()
    rule_text = str(value.get("rule", Rule.ALLOW.value)).strip().lower()
    if tier_text == OFF:
        tier = None
    else:
        try:
            tier = Tier.parse(tier_text)
        except ValueError as exc:
            raise ValueError(f"{pattern!r}: {exc}, or {OFF} (nobody)") from None
    try:
        rule = Rule(rule_text)
    except ValueError:
        raise ValueError(f"{pattern!r}: {rule_text!r} is not a rule; use allow or approve") from None
    return PolicyRule(pattern=pattern, tier=tier, rule=rule)
