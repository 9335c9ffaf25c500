"""``TEAMWORK_*``: bots that hand tasks to each other (``ask_bot``, ``core.teamwork``)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

__all__ = ("TeamworkSettings",)

_PEER = re.compile(r"^([A-Za-z0-9_-]{1,64})=(\S{1,64})$")


class TeamworkSettings(BaseModel):
    """``TEAMWORK_*``: this bot takes tasks from other bots of the fleet (its ``task`` context) and, with
    ``TEAMWORK_PEERS``, hands tasks to them (``ask_bot``); each bot is a deployment of its own on the same Redis,
    under its own ``REDIS_PREFIX``."""

    enabled: bool = Field(
        default=False,
        description="Take tasks from other bots and hand tasks to TEAMWORK_PEERS (plugins.teamwork(); needs REDIS_URL)",
    )
    peers: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="The bots ask_bot may ask, comma-separated name=REDIS_PREFIX of each (researcher=researcher:), "
        "on this bot's Redis",
    )
    max_depth: int = Field(
        default=2, ge=1, le=8, description="Times a task may be handed on from bot to bot (then it is answered)"
    )
    timeout: float = Field(default=60.0, gt=0, le=600, description="Seconds ask_bot waits for the other bot's answer")
    task_tokens: int = Field(
        default=8000,
        ge=100,
        le=1_000_000,
        description="Tokens a task may spend on the bot that takes it; they count in the asking person's daily budget",
    )

    @field_validator("peers", mode="before")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        found: dict[str, str] = {}
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            match = _PEER.match(part)
            if match is None:
                raise ValueError(
                    f"TEAMWORK_PEERS: {part[:80]!r} is not name=REDIS_PREFIX (researcher=researcher:), the name "
                    "letters, digits, - or _"
                )
            found[match.group(1)] = match.group(2)
        return found
