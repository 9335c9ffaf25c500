"""Documentation generated from ``Settings``: the README's settings table and ``.env.example``.

``python -m bots.docs`` rewrites both; a test fails when either is out of date.
"""

from __future__ import annotations

import enum
import re
import sys
from pathlib import Path
from typing import Any

import pydantic
from pydantic import SecretStr

from .config import env_name
from .settings import Settings

__all__ = ("render_env_example", "render_settings_table", "settings_variables", "update_files")

ROOT = Path(__file__).resolve().parent.parent
START = "<!-- settings:start -->"
END = "<!-- settings:end -->"


def _fields(model: type[pydantic.BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    rows: list[tuple[tuple[str, ...], Any]] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, pydantic.BaseModel) and not prefix:
            rows.extend(_fields(ann, (name,)))
        else:
            rows.append(((*prefix, name), field))
    return rows


def settings_variables() -> dict[str, Any]:
    """Every environment variable of ``Settings`` with its pydantic field, in declaration order."""
    return {env_name(loc): field for loc, field in _fields(Settings)}


def _default(field: Any) -> str:
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is None:
        return ""
    if isinstance(value, SecretStr):
        return ""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_secret(field: Any) -> bool:
    return "SecretStr" in repr(field.annotation)


def render_settings_table() -> str:
    """The Markdown table of every variable."""
    lines = ["| Variable | Default | Description |", "|---|---|---|"]
    for loc, field in _fields(Settings):
        default = _default(field)
        shown = f"`{default}`" if default else ""
        desc = (field.description or "").replace("|", "\\|")
        if _is_secret(field):
            desc += " (secret)" if "secret" not in desc.lower() else ""
        lines.append(f"| `{env_name(loc)}` | {shown} | {desc} |")
    return "\n".join(lines)


def render_env_example() -> str:
    """``.env.example``: every variable, commented out at its default."""
    out = ["# Every setting of the bot, at its default. Copy to .env and uncomment what you change.", ""]
    group = None
    for loc, field in _fields(Settings):
        if loc[0] != group:
            group = loc[0]
            if len(out) > 2:
                out.append("")
            out.append(f"# --- {group.upper()} ---")
        out.append(f"# {field.description or ''}".rstrip())
        out.append(f"# {env_name(loc)}={_default(field)}")
    return "\n".join(out) + "\n"


def _replace_between(text: str, body: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    return pattern.sub(lambda _: f"{START}\n{body}\n{END}", text)


def update_files(root: Path = ROOT) -> list[str]:
    """Rewrite the README table and ``.env.example``; return the files that changed."""
    changed = []
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    new = _replace_between(text, render_settings_table())
    if new != text:
        readme.write_text(new, encoding="utf-8")
        changed.append("README.md")
    example = root / ".env.example"
    body = render_env_example()
    if not example.exists() or example.read_text(encoding="utf-8") != body:
        example.write_text(body, encoding="utf-8")
        changed.append(".env.example")
    return changed


if __name__ == "__main__":
    changed = update_files()
    print("updated: " + ", ".join(changed) if changed else "up to date")
    sys.exit(0)
