"""Slack as a registered platform (``extensions.platforms``): this module imports no slack-bolt."""

from __future__ import annotations

from typing import Any

from core.definitions import Extension

from ..platforms import Build, Ingest, Platform
from .settings import SlackMode, SlackSettings

__all__ = ("PLATFORM", "channel")


def _build(build: Build) -> Extension:
    from . import slack_extension

    return slack_extension(build.settings, listen=build.listen, trust=build.trust)


def _configured(settings: SlackSettings) -> bool:
    return settings.configured


def _ingest(settings: SlackSettings) -> Ingest:
    return "shared"  # (Socket Mode: Slack hands each event to one of the open connections; Events API: a balancer)


def _listening(settings: SlackSettings) -> str:
    if settings.mode is SlackMode.EVENTS:
        return f"Events API on {settings.events_host}:{settings.events_port}{settings.events_path}"
    return "Socket Mode"


def _scaling(settings: SlackSettings, lease_seconds: float) -> str:
    if settings.mode is SlackMode.EVENTS:
        return (
            "Slack: the Events API; run any number of bots gateway processes behind one load balancer at the app's "
            "Request URL (each event goes to one of them, the fleet answers it once)"
        )
    return (
        "Slack: Socket Mode; run up to ten bots gateway processes (Slack hands each event to one of the open "
        "connections, the fleet answers it once)"
    )


def _warnings(settings: SlackSettings) -> list[str]:
    problem = settings.problem() if settings.configured else None
    return [problem] if problem else []


def channel(rest: str) -> tuple[str, dict[str, Any]] | None:
    """An operator's channel ``slack:<channel id>`` (``C0123ABC``), or a thread of it (``slack:<channel id>/<ts>``):
    the context type and its arguments."""
    name, _, thread = rest.partition("/")
    if name[:1] in ("C", "G", "D") and name.isalnum() and name.isupper() and (not thread or thread[:1].isdigit()):
        return "slack:conversation", {"channel": name, "thread_ts": thread or None}
    return None


PLATFORM = Platform(
    name="slack",
    title="Slack",
    build=_build,
    settings_group="slack",
    settings_class=SlackSettings,
    contexts=("slack:conversation",),
    configured=_configured,
    extra="slack_bolt",
    token_setting="SLACK_BOT_TOKEN",
    ingest=_ingest,
    listening=_listening,
    scaling=_scaling,
    warnings=_warnings,
    admin_ids=True,
    bot_ids=True,
    id_example="slack:U0123ABC",
    channel=channel,
    channel_forms="slack:<channel id> (slack:<channel id>/<thread ts> for a thread)",
)
"""Slack: a direct message, or one thread of a channel, is a conversation."""
