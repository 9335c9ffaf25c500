"""Every setting described from its pydantic field: ``bots config --explain NAME`` and the settings reference.

The entries are read from ``Settings`` (and the classes of its groups) at the moment they are asked for, so the
documentation site's reference page and the command line say what the code does, never what it did once.
A group is one settings class (``TELEGRAM_*`` is ``TelegramSettings``); the groups are shown under what an operator
is doing (``TASKS``: first run, a platform, scale, safety, cost, observability), and ``COMMON`` marks the dozen
variables most deployments set.
"""

from __future__ import annotations

import difflib
import enum
import inspect
import ipaddress
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import annotated_types
import pydantic
from pydantic import SecretStr

from core.errors import ConfigError
from extensions.platforms import all_platforms

from .config import env_name
from .settings import Settings

__all__ = (
    "COMMON",
    "TASKS",
    "TITLES",
    "SettingEntry",
    "explain",
    "group_title",
    "setting_entries",
    "settings_markdown",
)

_PLATFORMS = [p for p in all_platforms() if p.settings_group]
"""The registered platforms with settings (``extensions.platforms``), by name."""

COMMON = (
    *(p.token_setting for p in _PLATFORMS if p.token_setting),
    "LLM_PROVIDER",
    "LLM_MODEL",
    "LLM_API_KEY",
    "LLM_BASE_URL",
    "BOT_NAME",
    "BOT_ADMIN_USERS",
    "REDIS_URL",
    "DATABASE_URL",
    "HTTP_PORT",
    "CONSOLE_SECRET",
)
"""The variables most deployments set (marked "most set" in the reference)."""

TASKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("First run: who the bot is and its model", ("bot", "llm")),
    (
        "A platform: " + ", ".join(p.title for p in _PLATFORMS).replace(", The ", ", the "),
        tuple(p.settings_group for p in _PLATFORMS if p.settings_group),
    ),
    ("Scale: Redis and PostgreSQL", ("redis", "database")),
    ("Safety: trust tiers, approvals and tools", ("trust", "actions", "mcp", "skills")),
    ("Pictures, voice and files", ("media", "stt", "tts", "images")),
    ("A knowledge base the bot answers from", ("knowledge",)),
    ("Events from other systems: webhooks", ("webhooks",)),
    ("Running code the model writes: the sandbox", ("sandbox",)),
    ("Bots that work together", ("teamwork",)),
    ("Catch-up for a busy group", ("catchup",)),
    ("Observability: logs, endpoints, traces, console", ("log", "http", "tracing", "console")),
)
"""What an operator is doing, and the settings groups (fields of ``Settings``) it takes; cost and limits are
``BOT_*`` and ``LLM_PRICES`` (first run)."""


@dataclass(frozen=True, kw_only=True)
class SettingEntry:
    """One environment variable, as the reference and ``bots config --explain`` show it."""

    name: str
    """The environment variable: ``TELEGRAM_TOKEN``."""
    group: str
    """The field of ``Settings`` holding its class: ``telegram``."""
    type: str
    """What it takes, in words: ``integer``, ``true or false``, ``one of: polling, webhook``."""
    default: str
    """Its default as an operator writes it (empty: nothing)."""
    bounds: str
    """Its limits: ``>= 0, <= 600`` (empty: none)."""
    description: str
    """What it does (the field's description)."""
    secret: bool
    """Never printed (``SecretStr``)."""
    common: bool
    """One of ``COMMON``."""


TITLES = {
    "bot": "The bot",
    "llm": "The model",
    "redis": "Redis: gateways and workers",
    "mcp": "MCP servers",
    "database": "PostgreSQL",
    "log": "Logging",
    "http": "The health and metrics endpoint",
    "media": "Pictures, voice messages and files",
    "stt": "Speech to text",
    "tts": "Spoken replies",
    "images": "Pictures the bot makes",
    "console": "The operator console",
    "tracing": "Traces",
    "trust": "Trust tiers",
    "actions": "Actions policy and approvals",
    "knowledge": "The knowledge base",
    "skills": "Skills",
    **{p.settings_group: p.title for p in _PLATFORMS if p.settings_group},
}
"""A short title per group (the settings classes' docstrings say the rest)."""


def group_title(group: str) -> str:
    """The title of ``group`` (``"telegram"``), with the class's docstring when it says more than its prefix."""
    model = Settings.model_fields[group].annotation
    assert isinstance(model, type)
    doc = (inspect.getdoc(model) or "").split("\n\n")[0].replace("\n", " ").replace("``", "`")
    title = TITLES.get(group, group.upper())
    _, colon, said = doc.partition(": ")
    said = said.rstrip(".")
    echoes = said.lower() in title.lower() or (title.lower() in said.lower() and len(said) < len(title) + 5)
    if not colon or not said or echoes:
        return title
    return f"{title}: {said}"


def setting_entries() -> list[SettingEntry]:
    """Every variable of ``Settings``, in the order of its groups and fields."""
    entries = []
    for group, group_field in Settings.model_fields.items():
        model = group_field.annotation
        assert isinstance(model, type) and issubclass(model, pydantic.BaseModel)
        for name, field in model.model_fields.items():
            secret = _is_secret(field.annotation)
            var = env_name((group, name))
            entries.append(
                SettingEntry(
                    name=var,
                    group=group,
                    type=_type_words(field.annotation),
                    default="" if secret else _default(field),
                    bounds=_bounds(field),
                    description=field.description or "",
                    secret=secret,
                    common=var in COMMON,
                )
            )
    return entries


def explain(name: str) -> str:
    """One setting's entry as text (``bots config --explain TELEGRAM_TOKEN``); a name that is no setting raises
    ``ConfigError`` naming the closest ones."""
    entries = {entry.name: entry for entry in setting_entries()}
    entry = entries.get(name.strip().upper())
    if entry is None:
        close = difflib.get_close_matches(name.strip().upper(), entries, n=3)
        hint = f": did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"{name} is not a setting{hint} (bots config lists every setting)")
    lines = [
        f"{entry.name}  ({group_title(entry.group)})",
        f"  type     {entry.type}" + ("  (secret: never printed)" if entry.secret else ""),
        f"  default  {entry.default or '(empty)'}",
    ]
    if entry.bounds:
        lines.append(f"  bounds   {entry.bounds}")
    if entry.common:
        lines.append("  set by most deployments")
    lines += ["", *_wrap(entry.description, 100, "  ")]
    return "\n".join(lines)


def settings_markdown() -> str:
    """The settings reference page (Markdown): the groups under their operator tasks, one table each."""
    entries = setting_entries()
    by_group: dict[str, list[SettingEntry]] = {}
    for entry in entries:
        by_group.setdefault(entry.group, []).append(entry)
    placed = {group for _, groups in TASKS for group in groups}
    tasks = [*TASKS, ("Other", tuple(g for g in by_group if g not in placed))]
    out = [
        "# Settings",
        "",
        "Every knob is an environment variable `<GROUP>_<FIELD>`, read by pydantic-settings from the environment "
        "and from a `.env` file in the working directory. A bad value stops start-up with one line per problem, "
        "naming the variable; `bots config` prints the effective settings (secrets masked) with where each came "
        "from, and `bots config --explain NAME` prints one entry of this page.",
        "",
        f"This page is generated from the settings classes when the site is built: {len(entries)} variables in "
        f"{len(by_group)} groups. **Most set** marks the {len(COMMON)} that most deployments set: "
        + ", ".join(f"`{name}`" for name in COMMON)
        + ".",
        "",
    ]
    for title, groups in tasks:
        if not groups:
            continue
        out += [f"## {title}", ""]
        for group in groups:
            out += [f"### `{group.upper()}_*`", "", group_title(group), ""]
            out += ["| Variable | Type | Default | Bounds | What it does |", "|---|---|---|---|---|"]
            for entry in by_group[group]:
                name = f"`{entry.name}`" + (" **most set**" if entry.common else "")
                default = f"`{_cell(entry.default)}`" if entry.default else ""
                description = _cell(entry.description) + (" (secret)" if entry.secret else "")
                out.append(f"| {name} | {entry.type} | {default} | {entry.bounds} | {description} |")
            out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _wrap(text: str, width: int, indent: str) -> list[str]:
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines += textwrap.wrap(paragraph, width, initial_indent=indent, subsequent_indent=indent) or [""]
    return lines


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or SecretStr in typing.get_args(annotation)


def _default(field: Any) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(v.value if isinstance(v, enum.Enum) else v) for v in value)
    return str(value)


def _bounds(field: Any) -> str:
    parts = []
    for meta in field.metadata:
        for kind, attribute, words in (
            (annotated_types.Ge, "ge", ">="),
            (annotated_types.Gt, "gt", ">"),
            (annotated_types.Le, "le", "<="),
            (annotated_types.Lt, "lt", "<"),
            (annotated_types.MinLen, "min_length", "length >="),
            (annotated_types.MaxLen, "max_length", "length <="),
        ):
            if isinstance(meta, kind):
                parts.append(f"{words} {getattr(meta, attribute)}")
    return ", ".join(parts)


_SIMPLE: dict[Any, str] = {
    bool: "true or false",
    int: "integer",
    float: "number",
    str: "text",
    Path: "path",
    SecretStr: "text",
}


def _type_words(annotation: Any) -> str:
    """``int`` -> ``integer``; ``tuple[str, ...]`` -> ``list of text``; an enum -> ``one of: a, b``."""
    if annotation in _SIMPLE:
        return _SIMPLE[annotation]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of: " + ", ".join(str(member.value) for member in annotation)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "one of: " + ", ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        words = [_type_words(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(words))
    if origin in (tuple, list, set, frozenset):
        item = args[0] if args else str
        if isinstance(item, type) and issubclass(item, pydantic.BaseModel):
            return "JSON list"
        if typing.get_origin(item) in (typing.Union, types.UnionType) and ipaddress.IPv4Network in typing.get_args(
            item
        ):
            return "comma-separated addresses or networks"
        return "comma-separated list of " + _type_words(item).removeprefix("one of: ")
    if origin is dict:
        return "pairs"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")
