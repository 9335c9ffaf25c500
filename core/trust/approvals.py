"""The hand-off of a call whose rule says ``approve``: the step loop asks the agent's ``Approvals`` (registered
with ``Trust.approvals``) and gives the model what it answers as the call's result; the call itself does not
run in this run. Without approvals set up, such a call is refused with an error the model can explain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..definition_types import Host
    from ..definitions import ContextState
    from .tiers import Tier

__all__ = ("ApprovalRequest", "Approvals")


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequest:
    """A call that waits for an approver: everything needed to ask, and to run it once approved."""

    call_id: str
    """The id of the ``ActionCall`` log entry (unique; a good key for the pending approval)."""
    context_id: str
    """The conversation (``telegram:123``)."""
    context_type: str
    """Its context's type (``telegram:chat``): with ``args``, where the press's input is sent."""
    args: Any
    """The context's args (a ``ChatArgs``, a dict), as the run has them."""
    action: str
    """The action's name, as the model called it (``tickets:open``)."""
    address: str
    """Its address in the policy (``mcp:tickets:open``)."""
    arguments: str
    """The arguments as the model wrote them and the schema accepted them (untrusted: escape before showing, and
    never log them unless ``LOG_CONTENT``)."""
    parsed: Any
    """The validated arguments (what the handler would get)."""
    tier: Tier
    """The tier the run acts with (the least trusted author of its inputs)."""
    user: str | None
    """Who asked (``telegram:42``), when known."""
    correlation_id: str | None
    """The id of the message that led to the call (log lines, audit)."""


class Approvals(Protocol):
    """What the approvals extension implements (``Trust.approvals``)."""

    async def request(self, request: ApprovalRequest, *, state: ContextState, host: Host) -> Any:
        """Keep ``request`` pending (in the store: no lease or run is held while it waits) and ask the approvers.
        The value returned is the call's result the model reads now (a JSON-able value: "waiting for an admin's
        approval"); the call runs only once approved, later. Raise a ``RunError`` to refuse it: its message is the
        error the model reads."""
        ...

    async def withdraw(self, context_id: str) -> int:
        """A person pressed Stop in ``context_id``: its requests still pending are withdrawn (they never run, and
        their posted requests say so); how many were."""
        ...
