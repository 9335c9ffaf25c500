"""Plugins declare what they need (issue 52): ``Plugin.needs`` (the agent must have them) and ``Plugin.after`` (they
come first when present) order the agent's plugins; a need missing, or plugins needing each other in a circle, is a
``DefinitionError`` naming them as the agent is built."""

from __future__ import annotations

import pytest

from core import InMemoryStore, Plugin, ScriptedModel, create_agent
from core.errors import DefinitionError
from core.loop_guard import LoopGuard
from core.plugin import ordered
from core.trust import Trust
from core.trust.plugin import TrustGuard


def _plugin(name: str, *, needs: tuple[str, ...] = (), after: tuple[str, ...] = ()) -> Plugin:
    kind = type(f"P_{name}", (Plugin,), {"name": name, "needs": needs, "after": after})
    return kind()  # type: ignore[no-any-return]


def _names(plugins: list[Plugin]) -> list[str]:
    return [p.name for p in plugins]


def test_the_given_order_is_kept_when_it_already_fits() -> None:
    plugins = [_plugin("a"), _plugin("b", needs=("a",)), _plugin("c", after=("b",))]
    assert ordered(plugins) == plugins


def test_a_plugin_comes_after_what_it_needs_and_the_rest_keep_their_order() -> None:
    plugins = [_plugin("summary", needs=("history",)), _plugin("x"), _plugin("history"), _plugin("y")]
    assert _names(ordered(plugins)) == ["x", "history", "summary", "y"]


def test_after_orders_only_when_the_other_is_there() -> None:
    assert _names(ordered([_plugin("b", after=("a",)), _plugin("a")])) == ["a", "b"]
    assert _names(ordered([_plugin("b", after=("a",)), _plugin("c")])) == ["b", "c"]


def test_a_missing_need_is_an_error_naming_both() -> None:
    with pytest.raises(DefinitionError, match=r"plugin 'summary' needs 'history'.*plugins=\[\.\.\.\]"):
        create_agent(
            model=ScriptedModel(lambda r: ""), memory=InMemoryStore(), plugins=[_plugin("summary", needs=("history",))]
        )


def test_a_circle_is_an_error_naming_it() -> None:
    plugins = [_plugin("a", needs=("b",)), _plugin("b", after=("a",)), _plugin("c")]
    with pytest.raises(DefinitionError, match=r"in a circle: a -> b"):
        ordered(plugins)


def test_the_trust_guard_comes_after_the_loop_guard() -> None:
    guard = TrustGuard(Trust())
    agent = create_agent(model=ScriptedModel(lambda r: ""), memory=InMemoryStore(), plugins=[guard, LoopGuard()])
    assert _names(list(agent.plugins)) == ["loop-guard", "trust"]
