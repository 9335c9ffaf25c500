"""Discord as a registered platform (``extensions.platforms``): this module imports no discord.py."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from core.definitions import Extension

from ..platforms import Build, GatewayPeriod, Ingest, Platform
from .settings import DiscordSettings

if TYPE_CHECKING:
    from core.host import Host, Setup

__all__ = ("PLATFORM",)


def _build(build: Build) -> Extension:
    from . import discord_extension

    return discord_extension(build.settings, listen=build.listen, trust=build.trust, answers=build.fleet.get("answers"))


def _configured(settings: DiscordSettings) -> bool:
    return settings.token is not None and bool(settings.token.get_secret_value())


def _ingest(settings: DiscordSettings) -> Ingest:
    return "shards"


def _scaling(settings: DiscordSettings, lease_seconds: float) -> str:
    count = (
        "Discord's recommended number of shards (asked at start; every gateway must agree)"
        if settings.shard_count == "auto"
        else f"{settings.shard_count} shard{'s' if settings.shard_count != 1 else ''} (DISCORD_SHARD_COUNT)"
    )
    return (
        f"Discord: {count}; run any number of bots gateway processes: they divide the shards through Redis "
        f"leases (each a fair share, a dead one's shards taken over within REDIS_LEASE_SECONDS="
        f"{lease_seconds:g}), one shard login per DISCORD_IDENTIFY_INTERVAL="
        f"{settings.identify_interval:g}s per concurrency bucket across all of them; bots run connects every shard "
        "itself"
    )


def _gateway(agent: Setup, period: GatewayPeriod) -> AbstractAsyncContextManager[None]:
    from .gateway_shards import shard_leases

    return shard_leases(agent, period)


def _message_link(args: Any, message_id: str) -> str | None:
    """``https://discord.com/channels/<server id or @me>/<channel id>/<message id>`` (a thread is its own channel)."""
    fields = args if isinstance(args, dict) else {"channel_id": args.channel_id, "guild_id": args.guild_id}
    if not message_id.isdigit() or fields.get("channel_id") is None:
        return None
    return f"https://discord.com/channels/{fields.get('guild_id') or '@me'}/{fields['channel_id']}/{message_id}"


async def _private_chat(agent: Host, user_id: str) -> tuple[str, dict[str, Any]] | None:
    """The DM channel with the person, opened through Discord (POST /users/@me/channels) by this process's client."""
    from .definitions import get_runtime

    if not user_id.isdigit():
        return None
    channel_id = await get_runtime(agent).dm_channel(int(user_id))
    return "discord:channel", {"channel_id": channel_id, "guild_id": None}


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
    settings_class=DiscordSettings,
    contexts=("discord:channel",),
    configured=_configured,
    extra="discord",
    token_setting="DISCORD_TOKEN",
    ingest=_ingest,
    scaling=_scaling,
    listening=lambda settings: "shards shared with the other gateways",
    gateway=_gateway,
    admin_ids=True,
    bot_ids=True,
    id_example="discord:456",
    channel=_channel,
    channel_forms="discord:<channel id>",
    message_link=_message_link,
    private_chat=_private_chat,
    ordered_dedupe=True,  # a message id (a snowflake), growing per channel
)
"""Discord: a channel, thread or DM is a conversation."""
