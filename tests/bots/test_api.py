"""The operations modules of ``bots`` state their public API in ``__all__``: sorted, complete, importable."""

from __future__ import annotations

import importlib
import inspect

import pytest

MODULES = ["bots.cli", "bots.config", "bots.docs", "bots.logs", "bots.metrics", "bots.ops"]


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions, each alphabetical."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_complete_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=isort_key), f"{name}.__all__ is not sorted"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which does not exist"
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not inspect.ismodule(value)
        and (inspect.isfunction(value) or inspect.isclass(value))
        and getattr(value, "__module__", "") == name
    }
    missing = public - set(exported)
    assert not missing, f"{name} defines {sorted(missing)} without listing them in __all__"
