"""Operator settings of the Telegram adapter (``TELEGRAM_*``). Importing this needs no python-telegram-bot."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr

from ..chat.policy import ReplyPolicy

__all__ = ("TelegramSettings",)


class TelegramSettings(BaseModel):
    """``TELEGRAM_*`` environment variables."""

    token: SecretStr | None = Field(default=None, description="Bot token from @BotFather (secret)")
    reply_policy: ReplyPolicy = Field(
        default=ReplyPolicy.MENTION, description="When to answer in groups: always, mention or off"
    )
