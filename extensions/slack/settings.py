"""Operator settings of the Slack adapter (``SLACK_*``, the ``slack`` group of ``bots.Settings``, declared by
``extensions.slack.platform``). Importing this needs no slack-bolt."""

from __future__ import annotations

import enum
from typing import Annotated

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from ..chat.policy import ReplyPolicy

__all__ = ("SlackMode", "SlackSettings")

IdSet = Annotated[frozenset[str], NoDecode]
"""A set of channel or user ids, read from the environment as ``C01,C02``."""


class SlackMode(enum.StrEnum):
    """How events reach the bot."""

    SOCKET = "socket"
    """Socket Mode: the bot opens a websocket to Slack (``SLACK_APP_TOKEN``); no public URL. Slack spreads the
    events over up to ten connections, so several gateways may hold one each."""
    EVENTS = "events"
    """The Events API: Slack POSTs each event to ``SLACK_EVENTS_URL`` (served on ``SLACK_EVENTS_HOST:PORT``),
    signed with ``SLACK_SIGNING_SECRET``; every gateway behind one load balancer serves it."""


def _ids(value: object) -> object:
    if isinstance(value, str):
        return frozenset(part.strip() for part in value.split(",") if part.strip())
    return value


class SlackSettings(BaseModel):
    """``SLACK_*`` environment variables."""

    bot_token: SecretStr | None = Field(
        default=None, description="The app's Bot User OAuth Token, xoxb-... (see docs/how-to/slack.md) (secret)"
    )
    app_token: SecretStr | None = Field(
        default=None,
        description="An app-level token with connections:write, xapp-..., for Socket Mode (secret)",
    )
    signing_secret: SecretStr | None = Field(
        default=None, description="The app's signing secret, checking the Events API's requests (secret)"
    )
    mode: SlackMode = Field(
        default=SlackMode.SOCKET,
        description="socket (a websocket the bot opens, SLACK_APP_TOKEN) or events (Slack POSTs each event to the "
        "bot's SLACK_EVENTS_PATH, SLACK_SIGNING_SECRET)",
    )
    events_host: str = Field(default="0.0.0.0", description="Address the Events API endpoint listens on")
    events_port: int = Field(default=3000, ge=0, le=65535, description="Port of the Events API endpoint")
    events_path: str = Field(default="/slack/events", description="Path of the Events API endpoint")
    api_url: str = Field(
        default="https://slack.com/api/",
        description="Base URL of the Web API (a fake one in tests: http://127.0.0.1:8081/api/)",
    )
    reply_policy: ReplyPolicy = Field(
        default=ReplyPolicy.MENTION,
        description="When to answer in channels: always, mention (an @mention of the bot, or a thread it answers "
        "in) or off; direct messages are always answered",
    )
    allowed_channels: IdSet = Field(
        default=frozenset(), description="Only these channel ids get answers, comma-separated (empty: all)"
    )
    allowed_users: IdSet = Field(
        default=frozenset(), description="Only these user ids get answers, comma-separated (empty: all)"
    )
    stream_replies: bool = Field(
        default=True, description="Show answers while they are written (posted, then updated with chat.update)"
    )
    stream_interval: float = Field(
        default=1.2, ge=0.05, le=60, description="Seconds at least between two updates of an answer being written"
    )
    request_timeout: float = Field(default=30.0, gt=0, le=300, description="Seconds one Web API request may take")
    max_file_bytes: int = Field(
        default=20_000_000, ge=0, description="Files people share larger than this are not downloaded"
    )

    @field_validator("allowed_channels", "allowed_users", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        return _ids(value)

    @field_validator("api_url")
    @classmethod
    def _url(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith(("http://", "https://")):
            raise ValueError("SLACK_API_URL must start with https:// (or http:// for a local fake)")
        return value if value.endswith("/") else value + "/"

    @field_validator("events_path")
    @classmethod
    def _path(cls, value: str) -> str:
        return value if value.startswith("/") else "/" + value

    @property
    def token(self) -> SecretStr:
        """The bot token (an empty one when unset): what the fleet names its leases by (its hash)."""
        return self.bot_token if self.bot_token is not None else SecretStr("")

    @property
    def configured(self) -> bool:
        """The bot token is set (and, for its mode, the app token or the signing secret: ``check``)."""
        return bool(self.token.get_secret_value().strip())

    def problem(self) -> str | None:
        """What the mode lacks, as a line naming the variable; None when nothing."""
        if self.mode is SlackMode.SOCKET and not (self.app_token and self.app_token.get_secret_value().strip()):
            return "SLACK_APP_TOKEN is empty: Socket Mode needs an app-level token (xapp-...), or SLACK_MODE=events"
        if self.mode is SlackMode.EVENTS and not (
            self.signing_secret and self.signing_secret.get_secret_value().strip()
        ):
            return "SLACK_SIGNING_SECRET is empty: the Events API's requests cannot be checked without it"
        return None
