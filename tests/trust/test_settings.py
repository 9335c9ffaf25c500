"""The operator's trust settings read wrong: one line naming the variable (``bots config``, and ``ConfigError`` at
the start of every command)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots.app import build_trust
from bots.config import check_settings, load_settings
from core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("settings_env")  # no setting from this machine, no .env but the test's own


def test_a_policy_file_that_is_not_text_names_actions_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = tmp_path / "policy.bin"
    policy.write_bytes(b"\xff\xfe mcp:*=admin")
    monkeypatch.setenv("ACTIONS_POLICY", str(policy))
    settings = load_settings()
    [line] = [p for p in check_settings(settings, role="config") if "codec" in p]  # (LLM_* may have others)
    assert line.startswith(f"ACTIONS_POLICY names the file {str(policy)!r}, which cannot be read: 'utf-8' codec"), line
    with pytest.raises(ConfigError, match=r"^ACTIONS_POLICY names the file"):
        build_trust(settings)


def test_a_mistake_inside_a_policy_file_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = tmp_path / "policy.txt"
    policy.write_text("mcp:*=admin\nremember=wizard\n", encoding="utf-8")
    monkeypatch.setenv("ACTIONS_POLICY", str(policy))
    with pytest.raises(ConfigError) as exc:
        build_trust(load_settings())
    assert str(exc.value).startswith(f"ACTIONS_POLICY (the file {str(policy)!r}): 'remember': 'wizard' is not a tier")


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("TRUST_BOTS", "telegram:@otherbot, otherbot", "TRUST_BOTS: 'otherbot' names no bot; write telegram:@name"),
        ("TRUST_BOTS", "irc:123", "TRUST_BOTS: 'irc:123' names no bot"),  # (no such platform)
        ("TRUST_BOTS", "discord:@", "TRUST_BOTS: 'discord:@' names no bot"),
        ("TRUST_BOTS", "telegram:otherbot", "TRUST_BOTS: 'telegram:otherbot' names no bot"),  # no @: never matches
        ("TRUST_MEMBER_USERS", "telegram:5, 6", "TRUST_MEMBER_USERS: '6' is not a platform-qualified user id"),
        ("TRUST_MEMBER_USERS", "Telegram:5", "TRUST_MEMBER_USERS: 'Telegram:5' is not a platform-qualified"),
    ],
)
def test_a_bot_or_member_that_can_never_match_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    """Such an entry was accepted and matched nobody: the bot ignored the bot meant, the member was a guest."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    [line] = str(exc.value).splitlines()[1:]
    assert line.strip().startswith(says), line


def test_the_forms_of_bots_and_members_the_rules_match(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUST_BOTS", "*, telegram:*, Telegram:@OtherBot, discord:123")
    monkeypatch.setenv("TRUST_MEMBER_USERS", "telegram:5, discord:6, web:abc")
    trust = load_settings().trust
    assert trust.bots == {"*", "telegram:*", "telegram:@otherbot", "discord:123"}
    assert trust.member_users == {"telegram:5", "discord:6", "web:abc"}
