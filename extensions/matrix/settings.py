"""Operator settings of the Matrix adapter (``MATRIX_*``). Importing this needs no matrix-nio.

``bots.Settings`` gets a group ``matrix`` of this class from the platform's registration (``Platform.settings_class``):
its fields are read as ``MATRIX_<FIELD>`` from the environment and ``.env``, like every other group."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from ..chat.policy import ReplyPolicy

__all__ = ("MatrixSettings",)

IdSet = Annotated[frozenset[str], NoDecode]
"""A set of room or user ids, read from the environment as ``!a:example.org,!b:example.org``."""


class MatrixSettings(BaseModel):
    """``MATRIX_*`` environment variables."""

    homeserver: str = Field(
        default="",
        description="Base URL of the bot account's homeserver, scheme and host (and port): https://matrix.example.org",
    )
    user_id: str = Field(default="", description="The bot account's full user id: @bot:example.org")
    access_token: SecretStr | None = Field(
        default=None, description="The bot account's access token (see docs/how-to/matrix.md) (secret)"
    )
    device_id: str = Field(
        default="", description="The device id the access token belongs to (optional: the homeserver says it)"
    )
    reply_policy: ReplyPolicy = Field(
        default=ReplyPolicy.MENTION,
        description="When to answer in group rooms (more than two members): always, mention or off",
    )
    allowed_rooms: IdSet = Field(
        default=frozenset(), description="Only these room ids get answers, comma-separated (empty: all rooms)"
    )
    allowed_users: IdSet = Field(
        default=frozenset(), description="Only these user ids get answers, comma-separated (empty: all users)"
    )
    stream_replies: bool = Field(
        default=True, description="Show answers while they are written (posted, then edited with m.replace)"
    )
    stream_interval: float = Field(
        default=1.5, ge=0.05, le=60, description="Seconds at least between two edits of an answer being written"
    )
    sync_timeout: int = Field(default=30, ge=1, le=120, description="Seconds one /sync long poll may wait")
    request_timeout: float = Field(default=30.0, gt=0, le=300, description="Seconds one homeserver request may take")
    typing_interval: float = Field(
        default=20.0, gt=0, le=30, description='Seconds between two "typing..." notices while an answer is written'
    )

    @field_validator("allowed_rooms", "allowed_users", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return frozenset(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("homeserver")
    @classmethod
    def _url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("MATRIX_HOMESERVER must start with https:// (or http:// on a private network)")
        return value

    @field_validator("user_id")
    @classmethod
    def _user(cls, value: str) -> str:
        value = value.strip()
        if value and not (value.startswith("@") and ":" in value):
            raise ValueError("MATRIX_USER_ID must be a full user id: @bot:example.org")
        return value

    @property
    def token(self) -> SecretStr:
        """The access token (an empty one when unset): what the gateway's lease is named by (its hash)."""
        return self.access_token if self.access_token is not None else SecretStr("")

    @property
    def configured(self) -> bool:
        """The homeserver, the user id and the access token are all set."""
        return bool(self.homeserver and self.user_id and self.token.get_secret_value().strip())
