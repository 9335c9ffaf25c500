"""Test fixtures that take an agent's settings as keywords (``agent_options={"persona": ...}``) hand them to
``create_agent`` through ``agent_args``: the options go to ``AgentOptions``, the limits, usage and trust to their
plugins."""

from __future__ import annotations

from typing import Any

from core import AgentOptions
from core.limits.plugin import Limits
from core.media.plugin import Media
from core.memory.long_memory import LongMemory
from core.plugin import Plugin
from core.trust.plugin import TrustGuard
from core.usage.plugin import Usage

__all__ = ("agent_args",)

OPTIONS = frozenset(AgentOptions.__dataclass_fields__)


def agent_args(**given: Any) -> dict[str, Any]:
    """``create_agent`` keywords for ``given``: its own keywords as they are, the options in one
    ``AgentOptions``, ``usage``/``prices``, ``limiter``, ``trust``, ``media`` and ``history`` (with ``summary`` and
    ``summary_lock``) as plugins (after ``plugins``)."""
    plugins: list[Plugin] = list(given.pop("plugins", ()))
    usage, prices = given.pop("usage", None), given.pop("prices", None)
    if usage is not None or prices is not None:
        plugins.append(Usage(usage, prices=prices))
    limiter = given.pop("limiter", None)
    if limiter is not None:
        plugins.append(Limits(limiter))
    trust = given.pop("trust", None)
    if trust is not None:
        plugins.append(TrustGuard(trust))
    media = given.pop("media", None)
    if media is not None:
        plugins.append(Media(media))
    history, summary, lock = given.pop("history", None), given.pop("summary", None), given.pop("summary_lock", None)
    if history is not None:
        plugins.append(LongMemory(history, summary=summary, lock=lock))
    options = {k: given.pop(k) for k in list(given) if k in OPTIONS}
    return {**given, "plugins": plugins, "options": AgentOptions(**options)}
