"""``CATCHUP_*``: ``/catchup``, a summary of what a group said since someone's last message (``core.catchup``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ("CatchUpSettings", "telegram_link", "telegram_private")


class CatchUpSettings(BaseModel):
    """``CATCHUP_*``: ``/catchup [period] [private]`` in a group, answered from the conversation's history."""

    enabled: bool = Field(
        default=False,
        description="Answer /catchup with a summary of what was said since the person's last message (plugins."
        "catchup(); needs the history: BOT_DATA_DIR in one process, DATABASE_URL in a fleet)",
    )
    max_messages: int = Field(default=400, ge=10, le=5000, description="Messages a catch-up reads at most")
    max_chars: int = Field(
        default=24_000, ge=1000, le=400_000, description="Characters of messages the model is given (the newest kept)"
    )
    default_hours: float = Field(
        default=24.0, gt=0, le=24 * 30, description="Hours looked back for someone who wrote nothing before"
    )


def telegram_link(cid: str, message_id: str) -> str | None:
    """The address of a message of a Telegram supergroup (``https://t.me/c/<id>/<message>``); None elsewhere
    (a basic group or a private chat has no links)."""
    kind, _, key = cid.partition(":chat:")
    chat = key.split(":", 1)[0]
    if kind != "telegram" or not chat.startswith("-100") or not message_id.isdigit():
        return None
    return f"https://t.me/c/{chat.removeprefix('-100')}/{message_id}"


def telegram_private(cid: str, user_id: str) -> tuple[str, Any] | None:
    """The person's private chat with the bot, on Telegram (its chat id is theirs); None on another platform."""
    if not cid.startswith("telegram:") or not user_id.isdigit():
        return None
    return "telegram:chat", {"chat_id": int(user_id), "thread_id": None}
