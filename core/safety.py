"""Safe by default: the plugins every bot gets unless it goes without them by name.

Features are a bot's choice (it opts into each, ``core.plugin``); what keeps a bot safe is not. Every agent
gets the safety plugins below that its bot does not already have, before its own (the loop guard first: a
repeated call is refused before trust tiers or an approval see it), unless the bot names them in
``Bot(without=[...])`` or ``create_agent(without=[...])``::

    Bot(name="echo", without=["loop-guard"])  # a bot that wants its model's repeats delivered

| name | on | why |
|---|---|---|
| ``loop-guard`` | always (core) | a model that repeats itself (small ones do) answers a message once, not five times |
| ``limits`` | when deployed (``bots run``) | ``BOT_MAX_INPUT_CHARS`` and the operator's rate and token limits |

``limits`` is built from the operator's settings, so the deployment adds it (``bots.plugins``);
``create_agent`` alone, with no settings, adds only what core builds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import DefinitionError
from .loop_guard import LoopGuard
from .plugin import Plugin

__all__ = ("SAFE_DEFAULTS", "SafeDefault", "check_without", "with_safe_defaults")


@dataclass(frozen=True, kw_only=True, slots=True)
class SafeDefault:
    """A plugin every bot gets unless it goes without it."""

    name: str
    """The plugin's ``name``: a bot goes without it with ``without=[name]``."""
    why: str
    """Why it is on (the docs' table)."""
    build: Callable[[], Plugin] | None
    """How core builds it (None: the deployment builds it from its settings, ``bots.plugins``)."""


SAFE_DEFAULTS: tuple[SafeDefault, ...] = (
    SafeDefault(
        name=LoopGuard.name,
        why="a model that repeats a call or a reply answers one message once",
        build=LoopGuard,
    ),
    SafeDefault(
        name="limits",
        why="the operator's limits (BOT_MAX_INPUT_CHARS, messages and tokens per user) hold for every bot",
        build=None,
    ),
)
"""The safety plugins, in the order a bot gets them."""


def check_without(without: Sequence[str], *, where: str) -> tuple[str, ...]:
    """``without`` as names, each one of ``SAFE_DEFAULTS`` (else a ``DefinitionError`` naming ``where``)."""
    if isinstance(without, str):
        without = (without,)
    known = [d.name for d in SAFE_DEFAULTS]
    for name in without:
        if name not in known:
            raise DefinitionError(
                f"{where}(without=[{name!r}]): no safety plugin is named so; the names are {', '.join(known)}"
            )
    return tuple(without)


def with_safe_defaults(
    plugins: Sequence[Plugin],
    *,
    without: Sequence[str] = (),
    build: Callable[[SafeDefault], Plugin | None] | None = None,
) -> list[Plugin]:
    """``plugins`` with each safety plugin they lack (by name) and ``without`` does not name put first, in the
    order of ``SAFE_DEFAULTS``; ``build`` makes one core does not build (the deployment's settings)."""
    have = {p.name for p in plugins}
    added: list[Plugin] = []
    for default in SAFE_DEFAULTS:
        if default.name in have or default.name in without:
            continue
        plugin = default.build() if default.build is not None else build(default) if build is not None else None
        if plugin is not None:
            added.append(plugin)
    return [*added, *plugins]
