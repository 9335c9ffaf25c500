"""``bots config``: the effective settings with where each came from (secrets masked), what the servers they name
say, and every problem found, as text for a person or as JSON for a script (``--json``); ``--changed`` keeps only
the settings whose value differs from the default.

Exit code: 0 when nothing is wrong (warnings allowed, unless ``--strict``), 1 when something is.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from extensions.web.settings import WebSettings

from .config import (
    changed_variables,
    check_mcp_servers,
    check_settings,
    platforms,
    policy_lines,
    redis_report,
    safe_url,
    scaling_notes,
    settings_table,
    tokens,
)
from .hardening import weak_settings
from .models import model_lines
from .plugins import sandbox_problem
from .schedule_service import next_firings
from .service_checks import postgres_report
from .settings import Settings
from .unknown_env import unknown_variables_warnings

__all__ = ("ConfigReport", "config_command", "config_report")


@dataclass(kw_only=True)
class Setting:
    """One row of the table."""

    name: str
    """The variable (``LLM_PROVIDER``)."""
    value: str
    """As shown: secrets and URL passwords masked."""
    source: str
    """``default``, ``.env`` or ``environment``."""
    changed: bool
    """Its value differs from the default."""


@dataclass(kw_only=True)
class ConfigReport:
    """Everything ``bots config`` says; ``--json`` prints it as it is."""

    settings: list[Setting]
    """Every setting (or, with ``--changed``, those that differ from the default)."""
    platforms: list[str]
    """The chat platforms configured: ``telegram``, ``discord`` (a token set), ``web`` (the web chat's port)."""
    platform_notes: list[str] = field(default_factory=list)
    """"no platform configured", when it is so."""
    notes: list[str] = field(default_factory=list)
    """How the platforms spread over processes."""
    model: list[str] = field(default_factory=list)
    """Which model answers and why (``bots.models.model_lines``)."""
    redis: list[str] = field(default_factory=list)
    """What Redis said (its role, replicas)."""
    postgres: list[str] = field(default_factory=list)
    """What PostgreSQL said (its version, the history's schema version)."""
    mcp_servers: list[str] = field(default_factory=list)
    """The MCP servers and their tools."""
    policy: list[str] = field(default_factory=list)
    """The actions policy (``ACTIONS_POLICY``)."""
    schedules: list[str] = field(default_factory=list)
    """The next schedule firings."""
    warnings: list[str] = field(default_factory=list)
    """Unknown variables, weak secrets, unsafe server settings: the bot runs, but should not like this."""
    problems: list[str] = field(default_factory=list)
    """What would not work."""

    @property
    def ok(self) -> bool:
        """Nothing would not work."""
        return not self.problems


def _platforms_of(settings: Settings) -> list[str]:
    web_chat = settings.group(WebSettings)
    web = ["web"] if web_chat.chat_enabled and web_chat.port else []
    return platforms(settings) + web


async def config_report(settings: Settings, *, changed_only: bool = False) -> ConfigReport:
    """Read the settings' table and ask the servers they name (Redis, PostgreSQL, MCP servers)."""
    differ = changed_variables(settings)
    rows = [
        Setting(name=var, value=shown, source=source, changed=var in differ)
        for var, shown, source in settings_table(settings)
    ]
    report = ConfigReport(
        settings=[row for row in rows if row.changed] if changed_only else rows,
        platforms=_platforms_of(settings),
        notes=scaling_notes(settings),
        model=model_lines(settings.llm, data_dir=settings.bot.data_dir),
    )
    if not platforms(settings):
        report.platform_notes.append(
            f"no platform configured ({', '.join(tokens())}): bots run opens the terminal chat in a terminal"
            + (" and serves the web chat" if "web" in report.platforms else "")
            + "; bots gateway has no platform to listen to"
            + ("" if "web" in report.platforms else " (set WEB_PORT for the web chat)")
        )
    report.warnings = [*unknown_variables_warnings(os.environ), *weak_settings(settings)]
    report.problems = check_settings(settings, role="config")
    redis_lines, redis_problems = await redis_report(settings, role="config", warnings=report.warnings)
    report.redis = redis_lines
    report.problems += redis_problems
    database = settings.database.url.get_secret_value() if settings.database.url is not None else ""
    report.postgres, postgres_problems = await postgres_report(settings, where=safe_url(database.strip()))
    report.problems += postgres_problems
    report.mcp_servers, mcp_problems = await check_mcp_servers(settings)
    report.problems += mcp_problems
    report.policy = policy_lines(settings)
    sandbox = await sandbox_problem(settings)
    report.warnings += [sandbox] if sandbox else []
    report.schedules, schedule_problems = await next_firings(settings)
    report.problems += [] if redis_problems else schedule_problems  # (Redis's own problem says why they are not read)
    return report


def config_command(settings: Settings, *, strict: bool = False, changed: bool = False, as_json: bool = False) -> int:
    """Print the report (text, or JSON with ``as_json``); 1 when there are problems (or warnings with ``strict``)."""
    report = asyncio.run(config_report(settings, changed_only=changed))
    if strict and report.warnings:
        report.problems.append("--strict: the warnings count as problems")
    if as_json:
        out: dict[str, Any] = {"ok": report.ok, **asdict(report)}
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0 if report.ok else 1
    _print_text(report, changed=changed)
    return 0 if report.ok else 1


def _print_text(report: ConfigReport, *, changed: bool) -> None:
    rows = report.settings
    if rows:
        width = max(len(r.name) for r in rows)
        value_width = min(40, max(len(r.value) for r in rows))
        for row in rows:
            print(f"{row.name.ljust(width)}  {row.value.ljust(value_width)}  [{row.source}]")
    elif changed:
        print("(every setting is at its default)")

    def section(title: str, lines: list[str], *, out: Any = sys.stdout) -> None:
        if lines:
            print(f"\n{title}:", file=out)
            for line in lines:
                print(f"  {line}", file=out)

    section("platforms", [", ".join(report.platforms) or "none", *report.platform_notes])
    section("model", report.model)
    section("scaling", report.notes)
    section("warnings", report.warnings)
    section("redis", report.redis)
    section("postgresql", report.postgres)
    section("MCP servers", report.mcp_servers)
    section("actions policy (ACTIONS_POLICY; the most specific matching pattern wins)", report.policy)
    section("next schedule firings", report.schedules)
    if report.problems:
        section("problems", report.problems, out=sys.stderr)
    else:
        print("\nsettings OK")
