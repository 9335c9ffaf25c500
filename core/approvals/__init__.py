"""Approvals: a call whose rule says ``approve`` (``core.trust``) waits for an approver without holding a run.

The step loop hands the call to the ``ApprovalDesk`` (``Trust.approvals``), which stores it as pending and has
its platform's adapter post the request with Approve / Deny buttons; the model reads that it waits. A press by an
approver (admin tier or above), or the timeout, decides it, and the decision reaches the conversation as an input
of type ``approval`` through the agent's dispatcher, like a message: the process that runs it starts the approved
call once, and the model tells the outcome in a new run.

    desk = ApprovalDesk(timeout=600)                      # in the agent's memory store (one process)
    agent = create_agent(..., extensions=[desk.extension()], plugins=[TrustGuard(Trust(policy=policy))])

In a fleet: ``ApprovalDesk(core.fleet.RedisApprovalStore(backend))`` in every process (gateways ``sweep=False``).
"""

from .desk import ApprovalDesk, Asker, DecisionData, Pressed, desk_of
from .model import APPROVAL_INPUT, Approval, ApprovalStatus, Decision, shorten, valid_id
from .store import ApprovalStore, MemoryApprovalStore

__all__ = (
    "APPROVAL_INPUT",
    "Approval",
    "ApprovalDesk",
    "ApprovalStatus",
    "ApprovalStore",
    "Asker",
    "Decision",
    "DecisionData",
    "MemoryApprovalStore",
    "Pressed",
    "desk_of",
    "shorten",
    "valid_id",
)
