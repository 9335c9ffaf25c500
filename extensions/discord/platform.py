"""Discord as a registered platform (``extensions.platforms``): this module imports no discord.py."""

from __future__ import annotations

from typing import Any

from core.definitions import Extension

from ..platforms import Build, Ingest, Platform
from .settings import DiscordSettings

__all__ = ("PLATFORM",)


def _build(build: Build) -> Extension:
    from . import discord_extension

    return discord_extension(build.settings, listen=build.listen, trust=build.trust)


def _configured(settings: DiscordSettings) -> bool:
    return settings.token is not None and bool(settings.token.get_secret_value())


def _ingest(settings: DiscordSettings) -> Ingest:
    return "shards"


def _channel(rest: str) -> tuple[str, dict[str, Any]] | None:
    parts = rest.split(":")
    try:
        if len(parts) == 1:
            return "discord:channel", {"channel_id": int(parts[0])}
    except ValueError:
        pass
    return None


PLATFORM = Platform(
    name="discord",
    title="Discord",
    build=_build,
    settings_group="discord",
    contexts=("discord:channel",),
    configured=_configured,
    extra="discord",
    token_setting="DISCORD_TOKEN",
    ingest=_ingest,
    listening=lambda settings: "shards shared with the other gateways",
    admin_ids=True,
    bot_ids=True,
    id_example="discord:456",
    channel=_channel,
    channel_forms="discord:<channel id>",
    ordered_dedupe=True,  # a message id (a snowflake), growing per channel
)
"""Discord: a channel, thread or DM is a conversation."""
