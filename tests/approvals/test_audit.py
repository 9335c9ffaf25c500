"""The audit of trust decisions (``core.trust.audit``): a refused call, an approval request, an approval, a denial and
a timeout are each counted (``bots_actions_*_total``) and logged as ``bots`` logs them, with the correlation id of
the message that led to the call, the tier and the action's name; the call's arguments only with ``LOG_CONTENT``."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from prometheus_client import REGISTRY

from bots import metrics
from bots.logs import configure_logging
from bots.settings import LogSettings
from core.trust import AuditEvent, Tier
from tests.approvals.test_desk import built

ARGUMENTS = '"ticket": 7'
"""What the model's ``close_ticket`` calls carry (as the JSON log writes it)."""


def counted(event: AuditEvent, tier: Tier) -> float:
    labels = {"platform": "cli", "tier": tier.value}
    return REGISTRY.get_sample_value(f"bots_actions_{event.value}_total", labels) or 0.0


@pytest.mark.parametrize("content", [False, True], ids=["LOG_CONTENT=false", "LOG_CONTENT=true"])
@pytest.mark.usefixtures("restore_logging")
async def test_every_decision_is_counted_and_logged_with_its_message_s_id_and_tier_never_its_arguments(
    content: bool,
) -> None:
    stream = io.StringIO()
    configure_logging(LogSettings(format="json", level="INFO", content=content), stream=stream)
    now = [time.time()]
    agent, desk, recorder, closed, _ = built(sweep=False, timeout=60, clock=lambda: now[0])
    agent.add_observer(metrics.observe)
    before = {(e, t): counted(e, t) for e in AuditEvent for t in (Tier.GUEST, Tier.MEMBER)}
    chat = agent.contexts["cli:chat"]

    def message(cid: str, tier: Tier) -> dict[str, Any]:
        return {"type": "cli:text", "data": "close 7", "params": {"tier": tier.value}, "correlation_id": cid}

    await agent.start()
    try:
        await agent.send(chat, {"id": "g"}, message("m-refused", Tier.GUEST))  # close_ticket is for members
        for conversation in ("a", "d", "e"):
            await agent.send(chat, {"id": conversation}, message(f"m-{conversation}", Tier.MEMBER))
        approved, denied, _ = recorder.asked
        await desk.press(approved.id, approve=True, by="cli:9", name="Ada", tier=Tier.ADMIN)
        await desk.press(denied.id, approve=False, by="cli:9", name="Ada", tier=Tier.ADMIN)
        now[0] += 61
        assert await desk.sweep_once() == 3  # the third expires; the two decisions are told again (deduped)
    finally:
        await agent.stop()
    assert closed == [{"ticket": 7}]

    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    trust = [(e["correlation_id"], e["message"]) for e in lines if e["logger"] == "core.trust"]
    assert trust == [
        ("m-refused", "cli:chat:g: action close_ticket refused (tier guest): needs member"),
        ("m-a", "cli:chat:a: action close_ticket approval requested (tier member)"),
        ("m-d", "cli:chat:d: action close_ticket approval requested (tier member)"),
        ("m-e", "cli:chat:e: action close_ticket approval requested (tier member)"),
        ("m-a", "cli:chat:a: action close_ticket approved (tier member): by cli:9 (admin)"),
        ("m-d", "cli:chat:d: action close_ticket denied (tier member): by cli:9 (admin)"),
        ("m-e", "cli:chat:e: action close_ticket expired (tier member): nobody answered in 60s"),
    ]
    leaked = [e for e in lines if ARGUMENTS in e["message"]]
    assert all(e["logger"].startswith("content.") for e in leaked)
    assert bool(leaked) is content
    if content:  # the arguments of the refused call and of each request
        assert sum(e["logger"] == "content.trust" for e in leaked) == 4

    expected = {
        (AuditEvent.REFUSED, Tier.GUEST): 1,
        (AuditEvent.APPROVAL_REQUESTED, Tier.MEMBER): 3,
        (AuditEvent.APPROVED, Tier.MEMBER): 1,
        (AuditEvent.DENIED, Tier.MEMBER): 1,
        (AuditEvent.EXPIRED, Tier.MEMBER): 1,
    }
    assert {k: counted(*k) - v for k, v in before.items() if counted(*k) != v} == expected
