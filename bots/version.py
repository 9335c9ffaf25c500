"""The version of the installed project, as ``bots --version`` prints it and each fleet process announces it."""

from __future__ import annotations

__all__ = ("version",)


def version() -> str:
    """The installed version of the project (its package metadata: ``version`` in pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("daydreams-bots")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"
