"""What a plugin provides is found one way (issue 52): ``agent.provided(Kind)``, kept by the agent itself under the
class (``Host.provide``), never in a module-level registry keyed by the agent."""

from __future__ import annotations

import ast
from pathlib import Path

from core import InMemoryStore, ScriptedModel, create_agent
from core.approvals import ApprovalDesk
from core.approvals.desk import desk_of
from core.facts.plugin import Facts, facts_of
from core.schedules.service import Schedules, schedules_of
from core.slots import Slot

ROOT = Path(__file__).resolve().parents[2]


async def test_a_plugin_is_found_by_its_class() -> None:
    facts, desk = Facts(), ApprovalDesk()
    agent = create_agent(
        model=ScriptedModel(lambda request: ""), memory=InMemoryStore(), plugins=[facts], extensions=[desk.extension()]
    )
    schedules = Schedules.attach(agent)
    async with agent:  # (an extension is installed as the agent starts)
        assert agent.provided(Facts) is facts and facts_of(agent) is facts
        assert agent.provided(ApprovalDesk) is desk and desk_of(agent) is desk
        assert agent.provided(Schedules) is schedules and schedules_of(agent) is schedules


def test_each_agent_has_its_own() -> None:
    one, two = Facts(), Facts()
    first = create_agent(model=ScriptedModel(lambda request: ""), memory=InMemoryStore(), plugins=[one])
    second = create_agent(model=ScriptedModel(lambda request: ""), memory=InMemoryStore(), plugins=[two])
    bare = create_agent(model=ScriptedModel(lambda request: ""), memory=InMemoryStore())
    assert first.provided(Facts) is one and second.provided(Facts) is two and bare.provided(Facts) is None


def test_a_class_and_a_slot_are_keys_apart_and_taken_back() -> None:
    agent = create_agent(model=ScriptedModel(lambda request: ""), memory=InMemoryStore())
    slot: Slot[int] = Slot("number")
    take_back = agent.provide(int, 1)
    agent.provide(slot, 2)
    assert agent.provided(int) == 1 and agent.provided(slot) == 2
    take_back()
    assert agent.provided(int) is None and agent.provided(slot) == 2


def test_no_module_keeps_a_registry_keyed_by_an_agent() -> None:
    """No ``WeakKeyDictionary`` at module level in core/, bots/ or extensions/ but the schema cache of
    ``core.references`` (keyed by a schema, not an agent)."""
    found = []
    for package in ("core", "bots", "extensions"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
                if value is not None and "WeakKeyDictionary" in ast.unparse(value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert all(f.startswith("core/references.py:") for f in found), found
