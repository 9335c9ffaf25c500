"""Operator settings of the Discord adapter (``DISCORD_*``). Importing this needs no discord.py."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr

from ..chat.policy import ReplyPolicy

__all__ = ("DiscordSettings",)


class DiscordSettings(BaseModel):
    """``DISCORD_*`` environment variables."""

    token: SecretStr | None = Field(default=None, description="Bot token from the developer portal (secret)")
    reply_policy: ReplyPolicy = Field(
        default=ReplyPolicy.MENTION, description="When to answer in server channels: always, mention or off"
    )
