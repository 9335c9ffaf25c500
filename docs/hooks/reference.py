"""The reference pages, generated from the code each time the site is built, so they cannot drift from it.

A mkdocs hook (``hooks:`` in ``mkdocs.yml``): ``on_files`` adds five pages that exist in no file:

- ``reference/settings.md``: every environment variable, from the settings classes (``bots.explain``);
- ``reference/cli.md``: every command and option of ``bots``, from its argparse parser (``bots.cli``);
- ``reference/api.md``: every public name of ``core`` (``core.__all__``), rendered by mkdocstrings from its
  docstring and types;
- ``reference/redis-keys.md``: the Redis keys of a fleet (``core.fleet.keys``);
- ``reference/metrics.md``: the Prometheus metrics of ``/metrics`` (``bots.metrics``).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PAGES: dict[str, Callable[[], str]] = {}
"""Generated page path -> the function writing its Markdown."""


def page(path: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def register(render: Callable[[], str]) -> Callable[[], str]:
        PAGES[path] = render
        return render

    return register


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, render in PAGES.items():
        files.append(File.generated(config, path, content=render()))
    return files


# --- settings -------------------------------------------------------------------------------------------------


@page("reference/settings.md")
def settings_page() -> str:
    from bots.explain import settings_markdown

    return settings_markdown()


# --- the command line ------------------------------------------------------------------------------------------


class _Parser(BaseException):
    """Carries the parser ``bots.cli.main`` built out of it, before it parses anything."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__()
        self.parser = parser


@contextmanager
def _caught_parser() -> Iterator[None]:
    real = argparse.ArgumentParser.parse_args

    def catch(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Parser(self)

    argparse.ArgumentParser.parse_args = catch  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = real  # type: ignore[method-assign]


def bots_parser() -> argparse.ArgumentParser:
    """The parser of ``bots``: ``bots.cli.parser()`` when it offers one, else the one ``main`` builds (taken from
    it at its ``parse_args``, so nothing runs)."""
    cli = importlib.import_module("bots.cli")
    for name in ("parser", "build_parser", "make_parser"):
        if callable(getattr(cli, name, None)):
            built = getattr(cli, name)()
            assert isinstance(built, argparse.ArgumentParser)
            return built
    with _caught_parser():
        try:
            cli.main([])
        except _Parser as caught:
            return caught.parser
    raise RuntimeError("bots.cli.main did not build an argparse parser")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            name = ", ".join(f"`{option}{metavar}`" for option in action.option_strings)
        else:
            name = f"`{action.metavar or action.dest}`" + (" (optional)" if action.nargs in ("?", "*") else "")
        default = action.default
        shown = "" if default in (None, False, argparse.SUPPRESS, "") else f"`{default}`"
        choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
        help_text = (action.help or "").replace("|", "\\|") % {"default": default, "prog": parser.prog}
        rows.append(f"| {name} | {help_text} | {shown} | {choices} |")
    return rows


@page("reference/cli.md")
def cli_page() -> str:
    parser = bots_parser()
    import bots.cli

    out = [
        "# The `bots` command",
        "",
        "Installed as a console script in the virtual environment (`.venv/bin/bots`, or on the `PATH` in the image). "
        "This page is generated from the command's own argument parser when the site is built.",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        parser.description or "",
        "",
        _rst_to_markdown(bots.cli.__doc__ or ""),
        "",
        "| Command | What it does |",
        "|---|---|",
    ]
    subcommands = _subcommands(parser)
    out += [f"| [`bots {name}`](#bots-{name}) | {help_text} |" for name, help_text, _ in subcommands]
    out.append("")
    for name, help_text, sub in subcommands:
        out += [f"## `bots {name}` {{#bots-{name}}}", "", help_text, ""]
        if sub.description and sub.description != help_text:
            out += [sub.description, ""]
        out += ["```text", sub.format_usage().strip(), "```", ""]
        rows = _arguments(sub)
        if rows:
            out += ["| Argument | What it does | Default | Choices |", "|---|---|---|---|", *rows, ""]
        else:
            out += ["No arguments: the settings come from the environment ([Settings](settings.md)).", ""]
    return "\n".join(out)


# --- the Python API --------------------------------------------------------------------------------------------

API_GROUPS = (
    ("The agent", ("core.agent", "core.bot", "core.host", "core.dispatch")),
    ("Definitions", ("core.definitions",)),
    ("Models", ("core.models",)),
    ("The run: entries, events, prompt and parser", ("core.entries", "core.events", "core.prompt", "core.parser")),
    ("State paths", ("core.state_access", "core.schema", "core.escape")),
    ("Memory, usage and limits", ("core.memory", "core.usage", "core.limits", "core.chat_settings", "core.health")),
    ("Errors", ("core.errors",)),
)
"""Sections of the API page: a name goes in the first section one of whose module prefixes names its module."""


@page("reference/api.md")
def api_page() -> str:
    core = importlib.import_module("core")
    sections: dict[str, list[str]] = {title: [] for title, _ in API_GROUPS}
    sections["Other"] = []
    for name in core.__all__:
        module = getattr(getattr(core, name), "__module__", "") or ""
        title = next(
            (t for t, prefixes in API_GROUPS if any(module == p or module.startswith(p + ".") for p in prefixes)),
            "Other",
        )
        sections[title].append(name)
    out = [
        "# Python API: `core`",
        "",
        "Every public name of the framework, `from core import ...` (the names of `core.__all__`), with its "
        "docstring and types. This page is generated when the site is built; a test fails when a name has no "
        "docstring.",
        "",
        textwrap.dedent(core.__doc__ or "").strip(),
        "",
    ]
    for title, names in sections.items():
        if not names:
            continue
        out += [f"## {title}", ""]
        out += [f"::: core.{name}" for name in names]
        out.append("")
    return "\n".join(out)


# --- Redis keys ------------------------------------------------------------------------------------------------


def _rst_to_markdown(text: str) -> str:
    """The little reStructuredText of our docstrings: ````x```` is code; a paragraph ending ``::`` opens a
    literal block (the indented lines after it)."""
    lines = textwrap.dedent(text).strip().splitlines()
    out: list[str] = []
    block = False
    for line in lines:
        if block and line and not line.startswith(" "):
            out.append("```")
            block = False
        if line.rstrip().endswith("::") and not block:
            out += [line.rstrip()[:-1], "", "```text"]
            block = True
            continue
        out.append(line[4:] if block else line.replace("``", "`"))
    if block:
        out.append("```")
    return "\n".join(out)


@page("reference/redis-keys.md")
def redis_keys_page() -> str:
    keys_module = importlib.import_module("core.fleet.keys")
    keys = keys_module.Keys(prefix="bots:")
    context = keys.context("telegram:42")
    samples: dict[str, tuple[Any, ...]] = {
        "lock": ("telegram-poller",),
        "shards": ("bot",),
        "job_id": ("telegram:42", "1"),
        "cid_of_job": ("bots:drain:telegram:42:1",),
        "arq_job": ("bots:drain:telegram:42:1",),
        "arq_retry": ("bots:drain:telegram:42:1",),
        "memory": ("working:telegram:42",),
        "dedupe": ("tg:1001",),
        "ledger": ("7",),
        "webhook_seen": ("ci:s:5d41402abc4b2a76b9719d911017c592",),
        "webhook_rate": ("ci", 29931915),
        "task_answer": ("9f86d081884c7d659a2feaa0c55ad015",),
    }
    out = [
        "# Redis keys",
        "",
        "What a fleet (`bots gateway` and `bots worker`) keeps in Redis, from `core/fleet/keys.py`; every key starts "
        "with `REDIS_PREFIX` (`bots:` by default), so several bots can share one Redis. This page is generated when "
        "the site is built.",
        "",
        _rst_to_markdown(keys_module.__doc__ or ""),
        "",
        "## Every name, for the prefix `bots:` and the conversation `telegram:42`",
        "",
        "| Name | Example | What it is |",
        "|---|---|---|",
    ]
    for owner, target in (("Keys", keys), ("ContextKeys", context)):
        cls = type(target)
        for name, member in vars(cls).items():
            if name.startswith("_") or name in ("cid", "base", "prefix", "context"):
                continue
            doc = inspect.getdoc(member) or ""
            if isinstance(member, property):
                value = getattr(target, name)
            elif callable(member) or isinstance(member, staticmethod):
                value = getattr(target, name)(*samples.get(name, ("x",)))
            else:
                continue
            shown = " ".join(doc.split()).replace("``", "`").replace("|", "\\|")
            out.append(f"| `{owner}.{name}` | `{value}` | {shown} |")
    out.append("")
    return "\n".join(out)


# --- metrics ---------------------------------------------------------------------------------------------------


def _metrics(value: Any) -> Iterator[Any]:
    from prometheus_client.metrics import MetricWrapperBase

    if isinstance(value, MetricWrapperBase):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _metrics(item)


@page("reference/metrics.md")
def metrics_page() -> str:
    metrics_module = importlib.import_module("bots.metrics")
    out = [
        "# Metrics",
        "",
        "What `/metrics` exports (Prometheus text, or OpenMetrics with exemplars when asked), with `HTTP_PORT` set "
        "for `bots run`, `bots gateway` and `bots worker`; from `bots/metrics.py`, generated when the site is built. "
        "Beside these, prometheus-client's process and garbage-collector metrics. No metric carries a user id.",
        "",
        _rst_to_markdown(metrics_module.__doc__ or ""),
        "",
        "| Metric | Type | Labels | What it counts |",
        "|---|---|---|---|",
    ]
    seen: set[str] = set()
    for value in vars(metrics_module).values():
        for metric in _metrics(value):
            (family,) = metric.describe()
            name = family.name + ("_total" if family.type == "counter" else "")
            if name in seen:
                continue
            seen.add(name)
            labels = ", ".join(f"`{label}`" for label in getattr(metric, "_labelnames", ()))
            text = family.documentation.replace("|", "\\|")
            out.append(f"| `{name}` | {family.type} | {labels} | {text} |")
    out.append("")
    return "\n".join(out)
