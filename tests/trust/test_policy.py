"""The trust policy in the step loop: tiers, the policy's syntax and precedence, the prompt listing only what the
run's tier may call, a call it may not make refused before it runs (audited, the user told), approvals handed off."""

from __future__ import annotations

from typing import Any

import pytest

from core import ActionResult, InMemoryStore, ScriptedModel, action, context, create_agent, output
from core.entries import InputRef
from core.trust import (
    TRUST,
    ActionsPolicy,
    ApprovalRequest,
    PolicyRule,
    Rule,
    Tier,
    Trust,
    Verdict,
    tier_of,
)
from core.trust.plugin import TrustGuard

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=4)


def R(body: str) -> str:
    return f"<response>{body}</response>"


def test_tiers_are_ordered_and_parsed() -> None:
    assert [t.rank for t in Tier] == [5, 4, 3, 2, 1, 0]
    assert Tier.ADMIN.at_least(Tier.MEMBER) and not Tier.GUEST.at_least(Tier.MEMBER)
    assert Tier.lowest([Tier.ADMIN, Tier.GUEST, Tier.OWNER]) is Tier.GUEST
    assert Tier.parse(" Admin ") is Tier.ADMIN
    with pytest.raises(ValueError, match="owner, admin, member, guest, summoned, bot"):
        Tier.parse("root")


def test_an_input_carries_its_tier_and_one_without_gets_the_default_or_owner() -> None:
    ref = InputRef(type="telegram:message", params={"user_id": "7", "tier": "admin"})
    assert tier_of(ref) is Tier.ADMIN
    bare = InputRef(type="telegram:message", params={"user_id": "7"})
    assert tier_of(bare) is Tier.MEMBER
    assert tier_of(bare, owners=frozenset({"telegram:7"})) is Tier.OWNER
    assert tier_of(InputRef(type="x", params={"tier": "emperor"})) is Tier.GUEST  # unknown: the least but a bot


def test_defaults_open_actions_to_members_and_mcp_tools_to_admins() -> None:
    policy = ActionsPolicy()
    assert policy.verdict("remember", Tier.MEMBER) is Verdict.ALLOW
    assert policy.verdict("remember", Tier.GUEST) is Verdict.REFUSE
    assert policy.verdict("mcp:tickets:open", Tier.MEMBER) is Verdict.REFUSE
    assert policy.verdict("mcp:tickets:open", Tier.ADMIN) is Verdict.ALLOW
    assert not policy.approvals_needed


def test_the_compact_and_json_forms_agree_and_the_most_specific_rule_wins() -> None:
    compact = ActionsPolicy.parse(
        "# a public server\nmcp:*=admin, mcp:tickets:*=member/approve\nmcp:tickets:open=member\n"
        "remember=guest, mcp:shell:*=off"
    )
    data = ActionsPolicy.parse(
        '{"mcp:*": "admin", "mcp:tickets:*": {"tier": "member", "rule": "approve"}, "mcp:tickets:open": "member",'
        ' "remember": "guest", "mcp:shell:*": "off"}'
    )
    for policy in (compact, data):
        assert policy.verdict("mcp:tickets:close", Tier.MEMBER) is Verdict.APPROVE
        assert policy.verdict("mcp:tickets:open", Tier.MEMBER) is Verdict.ALLOW  # exact beats wildcard
        assert policy.verdict("mcp:search:query", Tier.MEMBER) is Verdict.REFUSE
        assert policy.verdict("mcp:shell:run", Tier.OWNER) is Verdict.REFUSE  # off: nobody
        assert policy.verdict("remember", Tier.GUEST) is Verdict.ALLOW
        assert policy.verdict("recall", Tier.GUEST) is Verdict.REFUSE  # the default for the rest
        assert policy.approvals_needed
    assert compact.describe()[:2] == ["mcp:*=admin", "mcp:tickets:*=member/approve"]
    assert compact.permission("recall").source == "*=member (default)"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("mcp:*", "pattern=tier"),
        ("mcp:*=root", "'root' is not a tier"),
        ("mcp:*=admin/maybe", "'maybe' is not a rule"),
        ('{"mcp:*": {"tier": "admin", "when": 1}}', "tier and rule"),
        ("{nope", "not valid JSON"),
        ("mcp:*=admin\nmcp:*=member", "'mcp:\\*' is given twice"),  # which one would win is not what was meant
        ('{"mcp:*": "admin", "mcp:*": "member"}', "'mcp:\\*' is given twice"),
    ],
)
def test_a_bad_policy_says_what_to_fix(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ActionsPolicy.parse(text)


def _agent(replies: list[str], trust: Trust | None, ran: list[str], posted: list[str]) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(replies)

    def tool(name: str, address: str | None = None) -> Any:
        return action(name=name, address=address, handler=lambda args, ctx, agent: ran.append(name) or "done")

    agent = create_agent(
        model=model,
        contexts=[chat],
        actions=[tool("remember"), tool("tickets:open", "mcp:tickets:open"), tool("deploy")],
        outputs=[output(type="chat:message", handler=lambda data, ctx, agent: posted.append(data))],
        memory=InMemoryStore(),
        plugins=[TrustGuard(trust)] if trust is not None else [],
    )
    return agent, model


def said(tier: str | None, text: str = "go") -> dict[str, Any]:
    params = {"user_id": "1"} | ({"tier": tier} if tier else {})
    return {"type": "chat:message", "data": text, "params": params}


async def test_the_prompt_lists_only_what_the_tier_may_call_and_a_hidden_call_never_runs() -> None:
    seen: list[tuple[str, float]] = []
    ran: list[str] = []
    posted: list[str] = []
    trust = Trust(policy=ActionsPolicy.parse("deploy=owner"))
    agent, model = _agent(
        [R('<action_call name="tickets:open">{}</action_call>'), R('<output type="chat:message">no</output>')],
        trust,
        ran,
        posted,
    )
    agent.add_observer(lambda kind, cid, value: seen.append((kind, value)))
    async with agent:
        chain = await agent.send(chat, "c", said("member"))
    first = model.requests[0]
    assert first.action_names == ("remember",)
    assert "tickets:open" not in first.system + first.prompt and "deploy" not in first.system + first.prompt
    assert ran == []
    [result] = [c for c in chain if isinstance(c, ActionResult)]
    assert "admin tier" in (result.error or "") and "member" in (result.error or "")
    assert "not run" in model.requests[1].prompt
    assert ("actions:refused:member", 1.0) in seen
    assert posted[0] == "⛔ I did not use tickets:open: it is for the admin tier and above here, and you are member."
    assert posted[1:] == ["no"]


async def test_an_admin_s_call_runs_and_a_guest_joining_the_run_lowers_its_tier() -> None:
    ran: list[str] = []
    agent, model = _agent(
        [R('<action_call name="tickets:open">{}</action_call>'), R('<output type="chat:message">ok</output>')],
        Trust(),
        ran,
        [],
    )
    async with agent:
        await agent.send(chat, "c", said("admin"))
        assert ran == ["tickets:open"]
        assert set(model.requests[0].action_names) == {"remember", "tickets:open", "deploy"}
        await agent.send(chat, "c", said("guest"))
    assert model.requests[-1].action_names == ()


async def test_a_call_that_needs_approval_is_refused_without_approvals_and_handed_to_them_with() -> None:
    ran: list[str] = []
    trust = Trust(policy=ActionsPolicy([PolicyRule(pattern="deploy", tier=Tier.MEMBER, rule=Rule.APPROVE)]))
    replies = [
        R('<action_call name="deploy">{"env": "prod"}</action_call>'),
        R('<output type="chat:message">k</output>'),
    ]
    agent, _ = _agent(replies * 2, trust, ran, [])
    asked: list[ApprovalRequest] = []

    class Approvals:
        async def request(self, request: ApprovalRequest, *, state: Any, host: Any) -> Any:
            asked.append(request)
            return {"status": "waiting for an admin's approval"}

    async with agent:
        chain = await agent.send(chat, "c", said("member"))
        [result] = [c for c in chain if isinstance(c, ActionResult)]
        assert "approvals are not set up" in (result.error or "")
        trust = agent.provided(TRUST)
        assert trust is not None
        trust.approvals = Approvals()
        chain = await agent.send(chat, "c", said("member", "again"))
        trust.approvals = None
    [result] = [c for c in chain if isinstance(c, ActionResult)]
    assert result.error is None and result.data == {"status": "waiting for an admin's approval"}
    assert ran == []
    [request] = asked
    assert (request.action, request.address, request.tier, request.user) == ("deploy", "deploy", Tier.MEMBER, "chat:1")
    assert request.parsed == {"env": "prod"} and request.context_id == "chat:c"
    assert trust.approvals is None


async def test_without_trust_every_action_is_offered() -> None:
    agent, model = _agent([R('<output type="chat:message">hi</output>')], None, [], [])
    async with agent:
        await agent.send(chat, "c", said("guest"))
    assert len(model.requests[0].action_names) == 3
