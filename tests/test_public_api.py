"""Each package states its public API in ``__all__``: complete, sorted, and every name importable."""

from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = [
    "core",
    "core.approvals",
    "core.catchup",
    "core.facts",
    "core.media",
    "core.memory",
    "core.models",
    "core.sandbox",
    "core.schedules",
    "core.teamwork",
    "core.webhooks",
    "extensions.chat",
    "extensions.terminal",
    "extensions.mcp",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which does not exist"


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_complete(name: str) -> None:
    module = importlib.import_module(name)
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not inspect.ismodule(value)
        and getattr(value, "__module__", name).startswith(name.split(".")[0])
        and attr not in ("annotations",)
    }
    missing = public - set(module.__all__)
    assert not missing, f"{name} exposes {sorted(missing)} without listing them in __all__"


def test_core_imports_no_platform_or_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, core, core.models, core.memory;"
        "bad = [m for m in ('discord', 'telegram', 'bots', 'openai', 'anthropic', 'xllamacpp', 'redis', 'arq')"
        " if m in sys.modules]; print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing core pulled in {out.stdout.strip()}"
