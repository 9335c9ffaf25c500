"""Trust: who may make the bot act (tiers from platform identity, policies on actions, approvals).

The adapter that receives a message computes its author's ``Tier`` and carries it in the input (``tier`` param);
the step loop offers each run only the actions its tier may call under the operator's ``ActionsPolicy`` and never
runs a call it may not make (``RunGuard``); a call whose rule says ``approve`` goes to the ``Approvals`` an
extension registers (``Trust.approvals``). Every refusal and approval is audited (``audit``).

    trust = Trust(policy=ActionsPolicy.parse("mcp:*=admin, mcp:tickets:open=member/approve"))
    agent = create_agent(..., plugins=[TrustGuard(trust)])  # core.trust.plugin.TrustGuard
"""

from .approvals import ApprovalRequest, Approvals
from .audit import AuditEvent, audit
from .guard import TRUST, Notice, RunGuard, Trust, english_notice
from .policy import DEFAULT_RULES, ActionsPolicy, Permission, PolicyRule, Rule, Verdict, address_of
from .tiers import TIER_PARAM, Tier, tier_of

__all__ = (
    "DEFAULT_RULES",
    "TIER_PARAM",
    "TRUST",
    "ActionsPolicy",
    "ApprovalRequest",
    "Approvals",
    "AuditEvent",
    "Notice",
    "Permission",
    "PolicyRule",
    "Rule",
    "RunGuard",
    "Tier",
    "Trust",
    "Verdict",
    "address_of",
    "audit",
    "english_notice",
    "tier_of",
)
