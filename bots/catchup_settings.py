"""``CATCHUP_*``: ``/catchup``, a summary of what a group said since someone's last message (``core.catchup``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from extensions.platforms import Platform, platform, platform_names

if TYPE_CHECKING:
    from core.host import Host

__all__ = ("CatchUpSettings", "message_link", "private_chat")


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


def message_link(cid: str, message_id: str, args: Any) -> str | None:
    """The address of a message of the conversation ``cid`` on its platform (``Platform.message_link``), or None."""
    found = _platform_of(cid)
    return found.message_link(args, message_id) if found is not None and found.message_link else None


async def private_chat(host: Host, cid: str, user_id: str) -> tuple[str, Any] | None:
    """The person's private chat with the bot on the platform of ``cid`` (``Platform.private_chat``), or None."""
    found = _platform_of(cid)
    if found is None or found.private_chat is None:
        return None
    return await found.private_chat(host, user_id)


def _platform_of(cid: str) -> Platform | None:
    name = cid.partition(":")[0]
    return platform(name) if name in platform_names() else None
