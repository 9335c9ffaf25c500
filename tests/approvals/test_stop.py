"""Stop withdraws the approvals still pending in its conversation (issue 37): the asked call never runs, nobody is
told (no new run), and the request posted on the platform says it was withdrawn; both stores list a conversation's
pending requests."""

from __future__ import annotations

import asyncio

from core.approvals import ApprovalStatus, ApprovalStore, Decision, Pressed
from core.trust import Tier
from extensions.chat.approvals import settled_text

from .test_desk import built, pending, store  # noqa: F401  (store: the fixture, memory and Redis)


async def test_stop_withdraws_the_pending_approval_and_marks_its_request() -> None:
    agent, desk, recorder, closed, model = built()
    await agent.start()
    try:
        chat = agent.contexts["cli:chat"]
        await agent.send(chat, {"id": "1"}, {"type": "cli:text", "data": "close 7", "params": {"tier": "member"}})
        (asked,) = recorder.asked
        calls = len(model.requests)
        assert await agent.request_stop("cli:chat:1") is True  # no answer was being written: the request was there
        (settled,) = recorder.settled
        assert settled.id == asked.id and settled.status is ApprovalStatus.WITHDRAWN and settled.prompt == "posted:1"
        pressed, found = await desk.press(asked.id, approve=True, by="cli:1", name="Ada", tier=Tier.ADMIN)
        assert pressed is Pressed.ALREADY and found is not None and found.status is ApprovalStatus.DONE
        assert found.outcome is not None and "withdrawn" in found.outcome["error"]
        await asyncio.sleep(0.2)
        assert closed == [] and len(model.requests) == calls  # never run, and no run tells the model
        assert await agent.request_stop("cli:chat:1") is False  # nothing left to stop
    finally:
        await agent.stop()


async def test_a_stop_elsewhere_leaves_the_request_pending() -> None:
    agent, _, recorder, _, _ = built()
    await agent.start()
    try:
        await agent.send(agent.contexts["cli:chat"], {"id": "1"}, {"type": "cli:text", "data": "close 7"})
        assert await agent.request_stop("cli:chat:2") is False
        assert recorder.settled == []
    finally:
        await agent.stop()


async def test_both_stores_list_a_conversations_pending_requests(store: ApprovalStore) -> None:  # noqa: F811
    mine, decided, other = pending("a1"), pending("a2"), pending("a3").model_copy(update={"conversation": "cli:chat:2"})
    for approval in (mine, decided, other):
        assert await store.add(approval)
    await store.decide("a2", Decision.DENIED, by="cli:1", name="Ada", at=1.0, retry_at=2.0)
    assert [a.id for a in await store.pending("cli:chat:1")] == ["a1"]
    withdrawn = await store.decide("a1", Decision.WITHDRAWN, by=None, name="", at=1.0, retry_at=2.0)
    assert withdrawn is not None and withdrawn.status is ApprovalStatus.WITHDRAWN
    assert await store.pending("cli:chat:1") == []


def test_a_withdrawn_request_says_so_where_it_was_posted() -> None:
    approval = pending().model_copy(update={"status": ApprovalStatus.WITHDRAWN})
    assert "Withdrawn" in settled_text(approval, "en")
    assert "Retirée" in settled_text(approval, "fr")
