"""core.approvals without a platform: both stores' compare-and-set (a real redis-server for the fleet's), and the
desk with a bot author's own action marked ``approve`` and an asker that records what it is asked (the press comes
from the test, as an adapter would report it)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pydantic
import pytest

import core
from core import InMemoryStore
from core.approvals import Approval, ApprovalDesk, ApprovalStatus, ApprovalStore, Decision, MemoryApprovalStore, Pressed
from core.fleet import QueueConfig, RedisApprovalStore, RedisBackend
from core.testing import updates_of
from core.trust import ActionsPolicy, Tier, Trust
from core.trust.guard import TRUST
from core.trust.plugin import TrustGuard
from tests.fleet.server import RedisServer

OUT = "cli:message"


class ChatId(pydantic.BaseModel):
    id: str


class Close(pydantic.BaseModel):
    ticket: int


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[ApprovalStore]:
    if request.param == "memory":
        yield MemoryApprovalStore(InMemoryStore())
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    backend = RedisBackend(QueueConfig(url=server.url, retry_seconds=5.0))
    try:
        yield RedisApprovalStore(backend)
    finally:
        await backend.close()


def pending(approval_id: str = "a1", *, expires_in: float = 60.0) -> Approval:
    now = time.time()
    return Approval(
        id=approval_id,
        conversation="cli:chat:1",
        context="cli:chat",
        args={"id": "1"},
        action="close_ticket",
        address="close_ticket",
        arguments='{"ticket": 7}',
        tier=Tier.MEMBER,
        created_at=now,
        expires_at=now + expires_in,
    )


async def test_each_change_happens_once_however_many_try(store: ApprovalStore) -> None:
    assert await store.add(pending()) is True
    assert await store.add(pending()) is False  # the same batch asking again
    await store.set_prompt("a1", "chat:42")
    now = time.time()
    decided = await asyncio.gather(
        store.decide("a1", Decision.APPROVED, by="telegram:2", name="Ada", at=now, retry_at=now + 30),
        store.decide("a1", Decision.DENIED, by="telegram:3", name="Bo", at=now, retry_at=now + 30),
        store.decide("a1", Decision.EXPIRED, by=None, name="", at=now, retry_at=now + 30),
    )
    winners = [d for d in decided if d is not None]
    assert len(winners) == 1 and winners[0].prompt == "chat:42"
    if winners[0].status is not ApprovalStatus.APPROVED:
        return
    started = await asyncio.gather(store.start("a1"), store.start("a1"))
    assert sum(s is not None for s in started) == 1
    assert await store.due(now + 3600, limit=10) == []  # running: no longer due (a redelivery says so)
    await store.finish("a1", {"result": "closed"})
    found = await store.get("a1")
    assert found is not None and found.status is ApprovalStatus.DONE and found.outcome == {"result": "closed"}
    assert await store.add(pending()) is False


async def test_the_due_ones_are_past_their_timeout_or_decided_and_not_told(store: ApprovalStore) -> None:
    await store.add(pending("late", expires_in=-1))
    await store.add(pending("later", expires_in=600))
    now = time.time()
    assert [a.id for a in await store.due(now, limit=10)] == ["late"]
    await store.decide("later", Decision.DENIED, by="discord:9", name="", at=now, retry_at=now + 5)
    assert {a.id for a in await store.due(now + 6, limit=10)} == {"late", "later"}
    await store.retry_at("later", now + 60)
    assert [a.id for a in await store.due(now + 6, limit=10)] == ["late"]
    soonest = await store.next_due()
    assert soonest is not None and soonest < now
    assert await store.get("not an id!") is None


class Recorder:
    """An asker that keeps what it is asked and settles."""

    def __init__(self) -> None:
        self.asked: list[Approval] = []
        self.settled: list[Approval] = []

    async def ask(self, approval: Approval, *, target: str | None) -> str | None:
        self.asked.append(approval)
        return f"posted:{len(self.asked)}"

    async def settle(self, approval: Approval) -> None:
        self.settled.append(approval)


def built(
    *, fails: str = "", **desk: Any
) -> tuple[core.Agent, ApprovalDesk, Recorder, list[dict[str, Any]], core.ScriptedModel]:
    """An agent on the terminal-less ``cli`` context with the author's ``close_ticket`` marked ``approve`` (``fails``:
    its handler raises a ValueError saying that)."""
    closed: list[dict[str, Any]] = []

    def close(args: Close, ctx: Any, agent: Any) -> str:
        if fails:
            raise ValueError(fails)
        closed.append(args.model_dump())
        return f"ticket {args.ticket} closed"

    chat = core.context(type="cli:chat", schema=ChatId, key=lambda args: args.id)
    reply = core.output(type=OUT, handler=lambda data, ctx, agent: None)
    action = core.action(name="close_ticket", schema=Close, handler=close)

    def answer(request: core.ModelRequest) -> str:
        updates = updates_of(request.prompt)
        for pattern, said in (
            (r"it ran and returned: ([^\n<]*)", "done: {}"),
            (r"(denied the call)", "denied"),
            (r"(it expired)", "expired"),
            (r"(it failed: [^\n<]*)", "{}"),
        ):
            if found := re.search(pattern, updates):
                return f'<response><output type="{OUT}">{said.format(found[1])}</output></response>'
        if "<action_result" in updates:
            return f'<response><output type="{OUT}">waiting</output></response>'
        return '<response><action_call name="close_ticket">{"ticket": 7}</action_call></response>'

    model = core.ScriptedModel(answer)
    approvals = ApprovalDesk(**desk)
    agent = core.create_agent(
        model=model,
        contexts=[chat],
        actions=[action],
        outputs=[reply],
        extensions=[approvals.extension()],
        plugins=[TrustGuard(Trust(policy=ActionsPolicy.parse("close_ticket=member/approve")))],
    )
    recorder = Recorder()
    approvals.add_asker("cli", recorder)
    return agent, approvals, recorder, closed, model


def said(chain: list[core.Log]) -> list[str]:
    return [str(e.data if e.data is not None else e.content) for e in chain if isinstance(e, core.OutputRef)]


async def test_an_authors_action_waits_then_runs_once_when_an_admin_approves() -> None:
    agent, desk, recorder, closed, model = built()
    await agent.start()
    try:
        chat = agent.contexts["cli:chat"]
        chain = await agent.send(
            chat, {"id": "1"}, {"type": "cli:text", "data": "close 7", "params": {"tier": "member"}}
        )
        assert said(chain) == ["waiting"] and closed == []
        (asked,) = recorder.asked
        assert asked.action == "close_ticket" and asked.arguments == '{"ticket": 7}' and asked.prompt is None

        assert (await desk.press(asked.id, approve=True, by="cli:2", name="M", tier=Tier.MEMBER))[
            0
        ] is Pressed.NOT_ALLOWED
        pressed, decided = await desk.press(asked.id, approve=True, by="cli:1", name="Ada", tier=Tier.ADMIN)
        assert pressed is Pressed.DECIDED and decided is not None and decided.status is ApprovalStatus.APPROVED
        again, _ = await desk.press(asked.id, approve=False, by="cli:1", name="Ada", tier=Tier.OWNER)
        assert again is Pressed.ALREADY
        await asyncio.wait_for(_until(lambda: len(model.requests) >= 3), 10)
        await agent.stop()  # the press's run is owned by the desk: finished before stop returns
        assert closed == [{"ticket": 7}]
        assert "ticket 7 closed" in model.requests[2].prompt and 'tier="member"' in model.requests[2].prompt
        assert (await desk.press("unknown", approve=True, by="cli:1", name="", tier=Tier.OWNER))[0] is Pressed.UNKNOWN
    finally:
        await agent.stop()


async def test_an_approved_call_that_fails_logs_no_argument_content(caplog: pytest.LogCaptureFixture) -> None:
    """The error of an approved call often quotes its arguments (a validation error, a handler's message): the model
    reads it, the log lines outside ``content`` (``LOG_CONTENT``) do not."""
    agent, desk, recorder, _, model = built(fails="ticket 7 of SECRET-ARGUMENT\nERROR forged: line")
    await agent.start()
    try:
        with caplog.at_level(logging.DEBUG):
            await agent.send(agent.contexts["cli:chat"], {"id": "1"}, {"type": "cli:text", "data": "close 7"})
            (asked,) = recorder.asked
            await desk.press(asked.id, approve=True, by="cli:1", name="Ada", tier=Tier.ADMIN)
            await asyncio.wait_for(_until(lambda: any("it failed" in r.prompt for r in model.requests)), 10)
        assert "SECRET-ARGUMENT" in model.requests[-1].prompt
        leaked = [r for r in caplog.records if "SECRET-ARGUMENT" in r.getMessage()]
        assert leaked and all(r.name.startswith("content.") for r in leaked)
    finally:
        await agent.stop()


async def test_a_request_nobody_answers_expires_and_is_settled_where_it_was_posted() -> None:
    agent, _, recorder, closed, model = built(timeout=1.0, poll=0.05)
    await agent.start()
    try:
        chat = agent.contexts["cli:chat"]
        await agent.send(chat, {"id": "1"}, {"type": "cli:text", "data": "close 7"})
        await asyncio.wait_for(_until(lambda: any("it expired" in r.prompt for r in model.requests)), 10)
        await asyncio.wait_for(_until(lambda: bool(recorder.settled)), 10)
        assert recorder.settled[0].status is ApprovalStatus.EXPIRED and recorder.settled[0].prompt == "posted:1"
        assert closed == []
    finally:
        await agent.stop()


async def test_requests_time_out_by_the_clock_the_sweeper_measures() -> None:
    """A fleet's worker sweeps by the Redis primary's clock (``ServerClock``, measured again at each look): when a
    measure finds that clock two minutes on, a one-minute request made before it has timed out."""
    offset = [0.0]
    recorder: Recorder | None = None

    async def sync() -> None:
        if recorder is not None and recorder.asked:
            offset[0] = 120.0  # measured again once the request is posted

    agent, _, recorder, closed, _ = built(timeout=60, poll=0.05, clock=lambda: time.time() + offset[0], sync=sync)
    await agent.start()
    try:
        chat = agent.contexts["cli:chat"]
        await agent.send(chat, {"id": "1"}, {"type": "cli:text", "data": "close 7"})
        await asyncio.wait_for(_until(lambda: bool(recorder.settled)), 10)
        assert recorder.settled[0].status is ApprovalStatus.EXPIRED and closed == []
    finally:
        await agent.stop()


class SweptWhilePosting(Recorder):
    """An asker during whose post the request times out: the desk's sweeper runs (its clock past the timeout) before
    the post returns, or after (``late``), once where it was posted is noted."""

    def __init__(self, late: bool = False) -> None:
        super().__init__()
        self.late = late
        self.desk: ApprovalDesk | None = None
        self.ahead = 0.0

    def clock(self) -> float:
        return time.time() + self.ahead

    async def ask(self, approval: Approval, *, target: str | None) -> str | None:
        assert self.desk is not None
        self.ahead = 3600.0
        if not self.late:
            assert await self.desk.sweep_once() == 1  # expired before it is known where it was posted
            assert self.settled == []
        return await super().ask(approval, target=target)


@pytest.mark.parametrize("late", [False, True], ids=["expired-while-posted", "expired-after"])
async def test_a_request_that_times_out_as_it_is_posted_is_settled_where_it_was_posted_once(
    store: ApprovalStore, late: bool
) -> None:
    asker = SweptWhilePosting(late)
    agent, desk, _, closed, model = built(store=store, sweep=False, timeout=60, clock=asker.clock)
    asker.desk = desk
    desk.add_asker("cli", asker)
    await agent.start()
    try:
        await agent.send(agent.contexts["cli:chat"], {"id": "1"}, {"type": "cli:text", "data": "close 7"})
        if late:
            assert asker.settled == []
            assert await desk.sweep_once() == 1
        await asyncio.wait_for(_until(lambda: bool(asker.settled)), 30)
        (settled,) = asker.settled
        assert settled.status is ApprovalStatus.EXPIRED and settled.prompt == "posted:1"
        assert await desk.sweep_once() == 0 and len(asker.settled) == 1  # and never again
        # and the model is told (the decision, told while the run that asked was ending, starts the next run)
        await asyncio.wait_for(_until(lambda: any("it expired" in r.prompt for r in model.requests)), 30)
        assert closed == []
    finally:
        await agent.stop()


async def test_a_decision_read_before_the_prompt_was_noted_keeps_it(store: ApprovalStore) -> None:
    """The fleet's store: the timeout reads the request, its post is noted, then the timeout writes: written from what
    it read, the decision would lose where the request was posted (and nobody would show it there)."""
    if not isinstance(store, RedisApprovalStore):
        pytest.skip("the memory store decides and notes under one lock")
    await store.add(pending())
    read = store._read
    noted: list[Approval | None] = []

    async def read_then_note(approval_id: str) -> tuple[Approval, str] | None:
        found = await read(approval_id)
        if not noted:
            noted.append(await store.set_prompt(approval_id, "chat:42"))
        return found

    store._read = read_then_note  # type: ignore[method-assign]
    now = time.time()
    expired = await store.decide("a1", Decision.EXPIRED, by=None, name="", at=now, retry_at=now + 30)
    (note,) = noted
    assert note is not None and note.status is ApprovalStatus.PENDING  # noted while pending: the decider shows it
    assert expired is not None and expired.prompt == "chat:42"
    stored = await store.get("a1")
    assert stored is not None and stored.status is ApprovalStatus.EXPIRED and stored.prompt == "chat:42"


async def test_without_an_asker_for_its_platform_the_call_is_refused_with_a_reason() -> None:
    agent, desk, recorder, closed, model = built()
    desk._askers.clear()
    await agent.start()
    try:
        await agent.send(agent.contexts["cli:chat"], {"id": "1"}, {"type": "cli:text", "data": "close 7"})
        assert "approvals cannot be asked from this conversation" in model.requests[1].prompt
        assert closed == [] and recorder.asked == []
    finally:
        await agent.stop()


async def _until(predicate: Any) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


async def test_bots_build_agent_sets_approvals_up_from_the_settings(tmp_path: Any) -> None:
    from bots.app import build_agent
    from bots.settings import Settings
    from core.approvals import desk_of

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        llm={"provider": "scripted"},
        bot={"data_dir": tmp_path},
        actions={"approval_timeout": 12, "approval_chats": "telegram:-100123:5"},
    )
    agent = build_agent(settings, memory=InMemoryStore(), listen=False, platforms=[])
    await agent.start()
    try:
        desk = desk_of(agent)
        assert desk is not None and desk.timeout == 12 and desk.admin_chats == {"telegram": "-100123:5"}
        assert agent.provided(TRUST) is not None and agent.provided(TRUST).approvals is desk
        assert isinstance(desk.store, MemoryApprovalStore)  # bots run: the memory store
    finally:
        await agent.stop()
