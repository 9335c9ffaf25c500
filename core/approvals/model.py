"""What a pending approval is: a call the policy holds for an approver (``core.trust``), kept in a store while
nobody holds a run or a lease for it, with what became of it (approved, denied, expired; run, with its outcome)."""

from __future__ import annotations

import enum
import re
from typing import Any

import pydantic

from ..trust import Tier

__all__ = (
    "APPROVAL_INPUT",
    "ID_PATTERN",
    "Approval",
    "ApprovalStatus",
    "Decision",
    "shorten",
    "valid_id",
)

APPROVAL_INPUT = "approval"
"""The type of the input a decision delivers to its conversation (an approver's press, or the timeout)."""

ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""What an approval id is made of (it names a Redis key and rides in a button's data: checked before use)."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def valid_id(value: object) -> bool:
    """True for a well-formed approval id."""
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def shorten(text: str, limit: int = 300) -> str:
    """``text`` on one line without control or direction characters, cut to ``limit`` characters (an ellipsis
    says where): how a call's untrusted arguments are shown to the approvers."""
    flat = _CONTROL.sub("", " ".join(text.split()))
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


class Decision(enum.StrEnum):
    """What became of a request."""

    APPROVED = "approved"
    """An approver accepted it: the call runs (once)."""
    DENIED = "denied"
    """An approver refused it: the call never runs."""
    EXPIRED = "expired"
    """Nobody answered within the timeout: the call never runs."""
    WITHDRAWN = "withdrawn"
    """The person stopped the answer that asked for it (Stop): the call never runs, and nobody is told."""


class ApprovalStatus(enum.StrEnum):
    """Where a request stands."""

    PENDING = "pending"
    """Waiting for an approver."""
    APPROVED = "approved"
    """Approved; its conversation is being told (the call has not started yet)."""
    DENIED = "denied"
    """Denied; its conversation is being told."""
    EXPIRED = "expired"
    """Timed out; its conversation is being told."""
    WITHDRAWN = "withdrawn"
    """Withdrawn by a Stop in its conversation (settled at once: its conversation is not told)."""
    RUNNING = "running"
    """The approved call was started (by the process running its conversation): it never starts again."""
    DONE = "done"
    """Its conversation was told (the outcome is kept a while, for a batch delivered again)."""

    @property
    def decided(self) -> bool:
        """True once an approver (or the timeout) has decided, until the conversation was told."""
        return self in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED, ApprovalStatus.EXPIRED)


class Approval(pydantic.BaseModel):
    """A call that waits (or waited) for an approver."""

    model_config = pydantic.ConfigDict(extra="ignore")

    id: str
    """The id of the call's log entry: the request's key, in the buttons' data."""
    conversation: str
    """The conversation of the call (``telegram:chat:-100123``)."""
    context: str
    """Its context's type (``telegram:chat``)."""
    args: Any = None
    """Its context's args as JSON (what the decision's input is sent with)."""
    action: str
    """The action's name as the model called it."""
    address: str
    """Its address in the policy (``mcp:tickets:open``)."""
    arguments: str = ""
    """The arguments as the model wrote them (untrusted: shown shortened and escaped, logged only with
    ``LOG_CONTENT``)."""
    tier: Tier = Tier.MEMBER
    """The tier the asking run acted with (its decision's run acts with it too)."""
    user: str | None = None
    """Who asked (``telegram:42``), when known."""
    asker: str = ""
    """Their display name (``@ann``) as their message gave it (untrusted text, shortened)."""
    correlation_id: str | None = None
    """The id of the message that led to the call (carried to the decision's run and the audit lines)."""
    created_at: float
    """When it was asked, in seconds since the epoch."""
    expires_at: float
    """When it times out, in seconds since the epoch."""
    status: ApprovalStatus = ApprovalStatus.PENDING
    """Where it stands."""
    decided_by: str | None = None
    """Who decided (``telegram:7``), None while pending or when it expired."""
    decider: str = ""
    """The decider's display name (untrusted text)."""
    decided_at: float | None = None
    """When it was decided, in seconds since the epoch."""
    prompt: str | None = None
    """Where the request was posted, as the platform's adapter wrote it (to show the decision there)."""
    outcome: dict[str, Any] | None = None
    """Once run: ``{"result": ..., "text": ...}`` or ``{"error": ...}``."""

    @property
    def platform(self) -> str:
        """The platform of its conversation (``telegram``)."""
        return self.context.partition(":")[0]

    @property
    def decision(self) -> Decision | None:
        """What was decided, while it is told (None while pending, running or done)."""
        return Decision(self.status.value) if self.status.decided else None

    def to_json(self) -> dict[str, Any]:
        """Its JSON form (what the stores keep)."""
        return self.model_dump(mode="json")
