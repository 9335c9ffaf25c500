"""The adapters' side of trust, without a platform: tiers from identity facts, the bots let in, the cap on
answers to bots, the cache of what a platform said; and the operator's settings."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from bots.app import build_trust, build_trust_rules
from bots.assistant import assistant_extension
from bots.settings import Settings
from core import action
from core.errors import ConfigError
from core.trust import Tier, Verdict, address_of
from extensions.chat.i18n import say
from extensions.chat.trust import SlidingCap, TrustRules, TtlCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_tiers_from_identity() -> None:
    rules = TrustRules(owners=frozenset({"discord:1"}), admin_roles=frozenset({"Helpers", "42"}))
    assert rules.tier("discord", 1) is Tier.OWNER
    assert rules.tier("discord", 1, is_bot=True) is Tier.BOT
    assert rules.tier("discord", 2, admin=True) is Tier.ADMIN
    assert rules.tier("discord", 2, roles=["Helpers"]) is Tier.ADMIN
    assert rules.tier("discord", 2, roles=["42", "Other"]) is Tier.ADMIN
    assert rules.tier("discord", 2, roles=["Other"]) is Tier.MEMBER
    assert rules.tier("telegram", 1) is Tier.MEMBER  # owners are per platform
    assert TrustRules(chat_admins=False).tier("telegram", 2, admin=True) is Tier.MEMBER


def test_a_member_list_makes_everyone_else_a_guest() -> None:
    rules = TrustRules(member_users=frozenset({"telegram:5"}), member_roles=frozenset({"Verified"}))
    assert rules.tier("telegram", 5) is Tier.MEMBER
    assert rules.tier("telegram", 6) is Tier.GUEST
    assert rules.tier("discord", 6, roles=["Verified"]) is Tier.MEMBER
    assert rules.tier("discord", 6, admin=True) is Tier.ADMIN  # an admin is not a guest
    newcomers = TrustRules(guest_days=7)
    assert newcomers.tier("discord", 6, joined_days=2) is Tier.GUEST
    assert newcomers.tier("discord", 6, joined_days=8) is Tier.MEMBER
    assert newcomers.tier("telegram", 6) is Tier.MEMBER  # the platform does not say when they joined


def test_bots_are_let_in_by_id_name_or_star() -> None:
    assert not TrustRules().allows_bot("telegram", 9, "helper_bot")
    rules = TrustRules(bots=frozenset({"telegram:@helper_bot", "discord:77"}))
    assert rules.allows_bot("telegram", 9, "Helper_Bot") and rules.allows_bot("discord", 77)
    assert not rules.allows_bot("discord", 9, "helper_bot") and not rules.allows_bot("telegram", 77)
    assert TrustRules(bots=frozenset({"*"})).allows_bot("discord", 1)


def test_the_cap_on_answers_to_bots_slides_with_the_window() -> None:
    clock = Clock()
    exchanges = SlidingCap(2, 60.0, clock=clock)
    assert exchanges.take("a") and exchanges.take("a") and not exchanges.take("a")
    assert exchanges.take("b")  # per chat
    clock.now = 59.0
    assert not exchanges.take("a")
    clock.now = 60.0
    assert exchanges.take("a") and exchanges.take("a") and not exchanges.take("a")


async def test_what_a_platform_said_is_kept_a_while_and_a_failure_is_not() -> None:
    clock = Clock()
    cache: TtlCache[int] = TtlCache(30.0, clock=clock)
    loads: list[int] = []

    async def load() -> int:
        loads.append(1)
        return len(loads)

    async def fail() -> int:
        raise RuntimeError("down")

    assert await cache.get("chat", load) == 1
    assert await cache.get("chat", load) == 1
    clock.now = 30.0
    with pytest.raises(RuntimeError):
        await cache.get("chat", fail)
    assert await cache.get("chat", load) == 2


def test_settings_build_the_rules_and_the_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = tmp_path / "policy.txt"
    policy.write_text("# for a public server\nmcp:*=admin\nmcp:tickets:open=member/approve\nremember=guest\n")
    monkeypatch.setenv("ACTIONS_POLICY", str(policy))
    monkeypatch.setenv("TRUST_ADMIN_ROLES", "Helpers, 42")
    monkeypatch.setenv("TRUST_BOTS", "telegram:@OtherBot,discord:7")
    monkeypatch.setenv("BOT_ADMIN_USERS", "telegram:1")
    settings = Settings(_env_file=None)
    rules = build_trust_rules(settings)
    assert rules.admin_roles == {"Helpers", "42"} and rules.owners == {"telegram:1"}
    assert rules.allows_bot("telegram", 5, "otherbot") and rules.allows_bot("discord", 7)
    trust = build_trust(settings)
    assert trust.policy.verdict("mcp:tickets:open", Tier.MEMBER) is Verdict.APPROVE
    assert trust.policy.verdict("remember", Tier.GUEST) is Verdict.ALLOW
    assert trust.notice("fr", "x", Tier.MEMBER, Tier.ADMIN) == say(
        "action_refused", "fr", action="x", needed="admin", tier="member"
    )
    monkeypatch.setenv("ACTIONS_POLICY", "mcp:*=boss")
    with pytest.raises(ConfigError, match="ACTIONS_POLICY: 'mcp:\\*': 'boss' is not a tier"):
        build_trust(Settings(_env_file=None))
    monkeypatch.setenv("ACTIONS_POLICY", str(tmp_path / "missing.txt"))
    with pytest.raises(ConfigError, match="cannot be read"):
        build_trust(Settings(_env_file=None))


def test_by_default_the_bot_s_own_actions_are_for_members_mcp_tools_for_admins_and_nothing_waits() -> None:
    """The defaults on the actions ``bots run`` really has: the assistant's memory actions (``remember``, ``recall``,
    ``search_history``) and the rest of its own are offered to members and not guests; an MCP tool to admins."""
    trust = build_trust(Settings(_env_file=None))
    own = list(assistant_extension().actions)
    tool = action(name="tickets:open", address="mcp:tickets:open", handler=lambda args, ctx, agent: None)
    names = {"remember", "recall", "search_history"}

    def offered(tier: Tier) -> set[str]:
        return {a.name for a in trust.offer(tier, [*own, tool])[0]}

    assert names <= offered(Tier.MEMBER) and offered(Tier.MEMBER) == {a.name for a in own}
    assert offered(Tier.GUEST) == set() and offered(Tier.ADMIN) == {a.name for a in own} | {"tickets:open"}
    assert not trust.policy.approvals_needed
    assert all(trust.policy.verdict(address_of(a), Tier.OWNER) is Verdict.ALLOW for a in [*own, tool])


def test_the_audit_counts_each_decision_by_tier() -> None:
    from prometheus_client import REGISTRY

    from bots import metrics

    before = REGISTRY.get_sample_value("bots_actions_refused_total", {"platform": "discord", "tier": "guest"}) or 0
    metrics.observe("actions:refused:guest", "discord:channel:1")
    metrics.observe("actions:nonsense:guest", "discord:channel:1")  # dropped, not raised
    after = REGISTRY.get_sample_value("bots_actions_refused_total", {"platform": "discord", "tier": "guest"})
    assert after == before + 1


def test_approval_chats_are_written_like_operator_channels_and_role_names_are_never_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACTIONS_APPROVAL_CHATS", "telegram:-100123:5, discord:7")
    monkeypatch.setenv("TRUST_ADMIN_ROLES", "[Mod], Helpers")
    settings = Settings(_env_file=None)
    assert settings.actions.admin_chats() == {"telegram": "-100123:5", "discord": "7"}
    assert settings.trust.admin_roles == {"[Mod]", "Helpers"}
    for wrong in ("discord:7:1", "slack:1", "telegram:abc"):
        monkeypatch.setenv("ACTIONS_APPROVAL_CHATS", wrong)
        with pytest.raises(
            pydantic.ValidationError, match=r"ACTIONS_APPROVAL_CHATS: channel .* write .*telegram:<chat"
        ):
            Settings(_env_file=None)
    monkeypatch.setenv("ACTIONS_APPROVAL_CHATS", "telegram:1,telegram:2")
    with pytest.raises(pydantic.ValidationError, match="one chat per platform"):
        Settings(_env_file=None)
