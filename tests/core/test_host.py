"""``Host``, the agent as every handler and hook sees it, stays small (issue 52): at most 20 members, each one
something handlers need; what only an extension, a plugin or a service uses while it sets itself up is
``Setup``'s, and what a feature keeps is found with ``provided``. The agent is both, and has no attribute for
what a plugin provides."""

from __future__ import annotations

import inspect

import pytest

from core import Agent, Host, InMemoryStore, ScriptedModel, Setup, create_agent
from core.limits import LIMITER, LimitConfig, Limiter
from core.limits.plugin import Limits
from core.media.plugin import Media
from core.media.reader import READER, MediaReader
from core.usage import USAGE
from core.usage.plugin import Usage

MOST = 20
"""The issue's bound on ``Host``'s members."""


def members(protocol: type) -> set[str]:
    """The public names ``protocol`` declares itself (methods and properties), not those it inherits."""
    return {name for name in vars(protocol) if not name.startswith("_")}


def test_host_has_at_most_20_members() -> None:
    found = members(Host)
    assert len(found) <= MOST, f"Host has {len(found)} members (at most {MOST}): {sorted(found)}"


def test_what_registers_is_setups_not_hosts() -> None:
    registrations = {"add_readiness", "add_observer", "add_event_listener", "add_action_source", "add_media_fetcher"}
    registrations |= {"add_service", "pin_settings", "provide"}
    assert registrations <= members(Setup) and not registrations & members(Host)
    assert Host in inspect.getmro(Setup)


def test_the_agent_is_a_setup() -> None:
    """Every member of both protocols is the agent's (a missing one would fail every install at run time)."""
    agent = create_agent(model=ScriptedModel(lambda request: ""), memory=InMemoryStore())
    missing = sorted(name for name in members(Host) | members(Setup) if not hasattr(agent, name))
    assert not missing


@pytest.mark.parametrize("name", ["usage", "limiter", "trust", "media", "history", "summarizer", "set_approvals"])
def test_the_agent_has_no_attribute_for_a_feature(name: str) -> None:
    assert not hasattr(Agent, name)


def test_a_feature_is_found_through_what_its_plugin_provides() -> None:
    usage, media = Usage(), Media(MediaReader())
    limits = Limits(Limiter(LimitConfig(messages_per_minute=5)))
    agent = create_agent(
        model=ScriptedModel(lambda request: ""), memory=InMemoryStore(), plugins=[usage, media, limits]
    )
    assert agent.provided(USAGE) is usage.store
    assert agent.provided(READER) is media.reader
    assert agent.provided(LIMITER) is limits.limiter
    bare = create_agent(model=ScriptedModel(lambda request: ""), memory=InMemoryStore())
    assert bare.provided(USAGE) is None and bare.provided(LIMITER) is None
