"""The audit trail of trust decisions: each is counted (observer kind ``actions:<event>:<tier>``, the
``bots_actions_*`` metrics) and logged with the correlation id (added by the log format), the tier and the action's
name; the arguments only on the ``content.trust`` logger, silent unless the operator turns ``LOG_CONTENT`` on."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from .tiers import Tier

__all__ = ("AuditEvent", "audit")

log = logging.getLogger("core.trust")
content_log = logging.getLogger("content.trust")
"""Arguments of the calls audited, silent unless the operator opts in (``LOG_CONTENT``)."""


class AuditEvent(enum.StrEnum):
    """A trust decision on one call (the metric's name: ``bots_actions_<event>_total``)."""

    REFUSED = "refused"
    """The author's tier may not call the action (or it needs an approval and none can be asked)."""
    APPROVAL_REQUESTED = "approval_requested"
    """The call waits for an approver."""
    APPROVED = "approved"
    """An approver accepted it; it runs."""
    DENIED = "denied"
    """An approver refused it."""
    EXPIRED = "expired"
    """Nobody answered in time."""


def audit(
    observe: Callable[[str, str, float], None],
    event: AuditEvent,
    *,
    context_id: str,
    tier: Tier,
    action: str,
    arguments: str | None = None,
    detail: str = "",
) -> None:
    """Count and log ``event`` on a call of ``action`` in ``context_id`` by an author of ``tier`` (``detail``: why,
    in a few words without user text); ``arguments`` go only to the ``content.trust`` logger."""
    observe(f"actions:{event.value}:{tier.value}", context_id, 1.0)
    log.info(
        "%s: action %s %s (tier %s)%s",
        context_id,
        action,
        event.value.replace("_", " "),
        tier.value,
        f": {detail}" if detail else "",
    )
    if arguments is not None:
        content_log.info("%s: arguments of %s: %s", context_id, action, arguments)
