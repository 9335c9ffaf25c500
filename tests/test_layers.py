"""The layering rules `lint-imports` cannot see, read from the source: only ``core/__init__.py`` imports
``core.agent`` (everything else takes ``from core import Agent`` or the ``core.host`` protocols), and no
extension or bot mutates the agent's containers (it calls ``agent.add_readiness``, ``add_event_listener``,
``add_observer``, ``add_action_source``, ``add_media_fetcher``, ``add_service``, ``pin_settings``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CONTAINERS = frozenset(
    {
        ("readiness",),
        ("event_listeners",),
        ("observers",),
        ("action_sources",),
        ("services",),
        ("media", "fetchers"),
        ("chat_policy", "pinned"),
    }
)
"""The agent's containers, as attribute paths from the agent."""
MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "popitem", "remove", "discard", "clear", "setdefault", "update", "add"}
)
"""Methods that change a list, dict or set in place."""
RECEIVERS = frozenset({"agent", "self._agent", "self.agent", "ctx.agent"})
"""How the agent is named where extensions and bots hold it."""


def _modules(*packages: str) -> Iterator[tuple[str, Path]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The absolute names an import statement brings in (``from x import y`` gives ``x`` and ``x.y``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, *([base] if base else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def agent_imports(module: str, path: Path) -> list[int]:
    """Lines of ``path`` that import ``core.agent``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and "core.agent" in _imported(module, path, node)
    ]


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _is_container(node: ast.expr) -> bool:
    """True for ``agent.readiness``, ``self._agent.media.fetchers`` and the like."""
    name = _dotted(node)
    if name is None:
        return False
    for path in CONTAINERS:
        suffix = "." + ".".join(path)
        if name.endswith(suffix) and name[: -len(suffix)] in RECEIVERS:
            return True
    return False


def container_mutations(path: Path) -> list[int]:
    """Lines of ``path`` that change one of the agent's containers in place or replace it."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and _is_container(node.func.value)
        ):
            lines.append(node.lineno)
            continue
        for target in targets:
            if (isinstance(target, ast.Subscript) and _is_container(target.value)) or _is_container(target):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_only_core_init_imports_core_agent() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for module, path in _modules("core", "extensions", "bots")
        if path != ROOT / "core" / "__init__.py"
        for line in agent_imports(module, path)
    }
    assert not found, (
        f"these import core.agent: {sorted(found)}; in core take the protocols of core.host (Host, Runner), "
        "elsewhere `from core import Agent`"
    )


def test_no_extension_or_bot_mutates_the_agents_containers() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for _, path in _modules("extensions", "bots")
        for line in container_mutations(path)
    }
    assert not found, (
        f"these change the agent's containers: {sorted(found)}; register through the agent's API instead "
        "(add_readiness, add_event_listener, add_observer, add_action_source, add_media_fetcher, add_service, "
        "pin_settings), each returning its undo"
    )


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        ("agent.readiness['x'] = check", [1]),
        ("self._agent.event_listeners.append(f)", [1]),
        ("agent.media.fetchers['telegram'] = fetch", [1]),
        ("agent.services.insert(0, svc)", [1]),
        ("agent.chat_policy.pinned.setdefault(cid, {}).update(pins)", [1]),
        ("del agent.readiness['x']", [1]),
        ("agent.observers = []", [1]),
        ("agent.add_readiness('x', check)\nchecks.update(agent.readiness_checks)", []),
        ("other.readiness['x'] = check\nself.services.append(svc)", []),
    ],
)
def test_the_mutation_check_sees_what_it_should(tmp_path: Path, source: str, lines: list[int]) -> None:
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    assert container_mutations(path) == lines


@pytest.mark.parametrize(
    ("module", "name", "source", "found"),
    [
        ("core.engine", "engine.py", "from .agent import Agent", True),
        ("core.fleet.drain", "drain.py", "from ..agent import Agent", True),
        ("core.fleet", "__init__.py", "from ..agent import Agent", True),
        ("core.fleet.drain", "drain.py", "from .. import agent", True),
        ("bots.app", "app.py", "import core.agent", True),
        ("core.fleet.drain", "drain.py", "from ..host import Runner", False),
        ("bots.app", "app.py", "from core import Agent", False),
    ],
)
def test_the_import_check_resolves_relative_imports(
    tmp_path: Path, module: str, name: str, source: str, found: bool
) -> None:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    assert bool(agent_imports(module, path)) is found
