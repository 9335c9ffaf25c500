"""Telegram as a registered platform (``extensions.platforms``): this module imports no python-telegram-bot."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from core.definitions import Extension

from ..platforms import Build, Ingest, Platform
from .settings import TelegramMode, TelegramSettings

if TYPE_CHECKING:
    from core.host import Host

__all__ = ("PLATFORM",)


def _message_link(args: Any, message_id: str) -> str | None:
    """A supergroup's message: ``https://t.me/c/<chat id without -100>/<message id>`` (a basic group or a private
    chat has no links)."""
    chat = str(args.chat_id if hasattr(args, "chat_id") else (args or {}).get("chat_id", ""))
    if not chat.startswith("-100") or not message_id.isdigit():
        return None
    return f"https://t.me/c/{chat.removeprefix('-100')}/{message_id}"


async def _private_chat(agent: Host, user_id: str) -> tuple[str, dict[str, Any]] | None:
    """A person's private chat has their user id (Telegram refuses it until they started one with the bot)."""
    return ("telegram:chat", {"chat_id": int(user_id), "thread_id": None}) if user_id.isdigit() else None


def _build(build: Build) -> Extension:
    from . import telegram_extension

    return telegram_extension(
        build.settings,
        listen=build.listen,
        trust=build.trust,
        answers=build.fleet.get("answers"),
        ephemeral=build.fleet.get("ephemeral"),
    )


def _configured(settings: TelegramSettings) -> bool:
    return settings.token is not None and bool(settings.token.get_secret_value())


def _ingest(settings: TelegramSettings) -> Ingest:
    return "shared" if settings.mode is TelegramMode.WEBHOOK else "single"  # getUpdates allows one poller


def _listening(settings: TelegramSettings) -> str:
    if settings.mode is TelegramMode.WEBHOOK:
        return f"webhook on {settings.webhook_listen}:{settings.webhook_port}"
    return "polling"


def _scaling(settings: TelegramSettings, lease_seconds: float) -> str:
    if settings.mode is TelegramMode.WEBHOOK:
        return (
            "Telegram (webhook): every bots gateway serves the webhook; run any number behind one load "
            "balancer at TELEGRAM_WEBHOOK_URL (each answers 200 only once the update is stored)"
        )
    return (
        "Telegram (polling): one bots gateway polls (getUpdates allows one poller), the others stand by "
        "and take over within REDIS_LEASE_SECONDS; set TELEGRAM_MODE=webhook to share the ingest"
    )


def _channel(rest: str) -> tuple[str, dict[str, Any]] | None:
    parts = rest.split(":")
    try:
        if 1 <= len(parts) <= 2:
            thread = int(parts[1]) if len(parts) == 2 else None
            return "telegram:chat", {"chat_id": int(parts[0]), "thread_id": thread}
    except ValueError:
        pass
    return None


def _warnings(settings: TelegramSettings) -> list[str]:
    if settings.mode == "webhook" and settings.webhook_url and urlsplit(settings.webhook_url).scheme == "http":
        return [
            "TELEGRAM_WEBHOOK_URL is http://: TELEGRAM_WEBHOOK_SECRET and every update travel in clear; use the "
            "https:// URL of a proxy with TLS in front of the webhook"
        ]
    return []


PLATFORM = Platform(
    name="telegram",
    title="Telegram",
    build=_build,
    settings_group="telegram",
    settings_class=TelegramSettings,
    warnings=_warnings,
    contexts=("telegram:chat",),
    configured=_configured,
    extra="telegram",
    token_setting="TELEGRAM_TOKEN",
    ingest=_ingest,
    listening=_listening,
    scaling=_scaling,
    admin_ids=True,
    bot_ids=True,
    id_example="telegram:123",
    channel=_channel,
    channel_forms="telegram:<chat id> (telegram:<chat id>:<topic id> for a forum topic)",
    message_link=_message_link,
    private_chat=_private_chat,
    ordered_dedupe=True,  # an update id, growing per bot
)
"""Telegram: a chat (or a forum topic) is a conversation."""
