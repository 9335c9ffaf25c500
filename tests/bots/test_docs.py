""".env.example is generated from Settings and kept current (the settings reference of the documentation site is
generated when the site is built: tests/docs)."""

from __future__ import annotations

from pathlib import Path

from bots.docs import render_env_example

ROOT = Path(__file__).resolve().parents[2]


def test_env_example_is_current() -> None:
    assert (ROOT / ".env.example").read_text(encoding="utf-8") == render_env_example(), (
        ".env.example is stale: run python -m bots.docs"
    )
