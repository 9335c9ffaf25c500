"""The README's settings table and .env.example are generated from Settings and kept current."""

from __future__ import annotations

from pathlib import Path

from bots.docs import END, START, render_env_example, render_settings_table

ROOT = Path(__file__).resolve().parents[2]


def test_readme_settings_table_is_current() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert body == render_settings_table(), "README settings table is stale: run python -m bots.docs"


def test_env_example_is_current() -> None:
    assert (ROOT / ".env.example").read_text(encoding="utf-8") == render_env_example(), (
        ".env.example is stale: run python -m bots.docs"
    )
