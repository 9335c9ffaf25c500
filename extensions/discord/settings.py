"""Operator settings of the Discord adapter (``DISCORD_*``). Importing this needs no discord.py.

Lists of ids come from the environment as comma-separated values (``DISCORD_ALLOWED_CHANNELS=1,2``);
per-channel reply policies as ``id:policy`` pairs (``DISCORD_CHANNEL_POLICIES=123:always,456:off``).
JSON (``[1, 2]``, ``{"123": "always"}``) is accepted too.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from ..chat.commands import parse_channel_settings
from ..chat.i18n import say
from ..chat.policy import ReplyPolicy

__all__ = ("DEFAULT_API_URL", "DEFAULT_GATEWAY_URL", "DiscordSettings")

DEFAULT_API_URL = "https://discord.com/api/v10"
"""Discord's REST base (what ``discord.http.Route.BASE`` holds by default)."""
DEFAULT_GATEWAY_URL = "wss://gateway.discord.gg/"
"""Discord's gateway (what ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` holds by default)."""

Ids = Annotated[frozenset[int], NoDecode]


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _parse_ids(value: Any, what: str) -> Any:
    """``"1,2"`` or ``"[1, 2]"`` or a single id or a collection of ids -> a list of ints."""
    if value is None:
        return []
    if isinstance(value, int | str) and not isinstance(value, bool):
        text = str(value).strip()
        value = json.loads(text) if text.startswith("[") else _split(text)
    try:
        return [int(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(
            f"{what} must be Discord ids (numbers) separated by commas, for example 123,456; got {value!r}"
        ) from None


class DiscordSettings(BaseModel):
    """``DISCORD_*`` environment variables."""

    token: SecretStr | None = Field(
        default=None,
        description="Bot token from the developer portal, Bot tab (secret); empty disables the Discord adapter",
    )
    reply_policy: ReplyPolicy = Field(
        default=ReplyPolicy.MENTION,
        description="When to answer in server channels: always, mention (mentioned or replied to) or off; "
        "DMs are always answered",
    )
    channel_policies: Annotated[dict[int, ReplyPolicy], NoDecode] = Field(
        default_factory=dict,
        description="Per-channel reply policy overrides as id:policy pairs, for example 123:always,456:off; "
        "a thread without its own entry follows its parent channel",
    )
    allowed_guilds: Ids = Field(
        default_factory=frozenset,
        description="Only answer in these servers (comma-separated guild ids); empty allows every server",
    )
    allowed_channels: Ids = Field(
        default_factory=frozenset,
        description="Only answer in these server channels (comma-separated ids; a thread passes when its "
        "parent is listed); empty allows every channel; DMs are not affected",
    )
    allowed_users: Ids = Field(
        default_factory=frozenset,
        description="Only answer these users, in servers and DMs (comma-separated user ids); empty allows everyone",
    )
    allow_dms: bool = Field(default=True, description="Answer direct messages")
    allow_bots: bool = Field(
        default=False, description="Answer messages written by other bots (the bot never answers itself)"
    )
    bot_hop_limit: int = Field(
        default=3,
        ge=1,
        le=100,
        description="With DISCORD_ALLOW_BOTS: answer at most this many bot messages in a row in one channel "
        "(a human message resets the count), which stops bot-to-bot loops",
    )
    api_url: str = Field(
        default=DEFAULT_API_URL,
        description="REST base URL including the version (https://discord.com/api/v10), for a rate-limit proxy or "
        "a fake Discord in tests, with DISCORD_GATEWAY_URL (sets discord.http.Route.BASE)",
    )
    gateway_url: str = Field(
        default=DEFAULT_GATEWAY_URL,
        description="Gateway websocket URL, for a gateway proxy (sets DiscordWebSocket.DEFAULT_GATEWAY)",
    )
    sync_commands: bool = Field(
        default=True, description="Register the /reset, /forget and /help slash commands with Discord at start"
    )
    shard_count: int | Literal["auto"] = Field(
        default=1,
        description="Gateway connections (shards) the bot's servers are split over; auto asks Discord for its "
        "recommended count (required from 2,500 servers). Every bots gateway process holds a fair share "
        "of them through Redis leases",
    )
    identify_interval: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="Seconds between two shard logins (IDENTIFY) in one concurrency bucket, across every "
        "gateway process; Discord allows one per 5 s (lower it only against a test server)",
    )
    guild_ready_timeout: float = Field(
        default=2.0, gt=0, le=60, description="Seconds to wait for server data after connecting before 'ready'"
    )
    connect_timeout: float = Field(
        default=60.0, gt=0, le=3600, description="Seconds agent start waits for the login and the gateway to be ready"
    )
    request_timeout: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="Seconds one REST call may take, rate-limit waits included, before it fails",
    )
    typing_interval: float = Field(
        default=8.0, gt=0, le=10, description="Seconds between typing indicators while an answer is written"
    )
    components_v2: bool = Field(
        default=True,
        description="Lay an answer with structure (a table, headings, lists, code) out with components v2 (a "
        "container of text displays) instead of plain text, falling back to plain text where Discord refuses it; "
        "an answer shown while written (DISCORD_STREAM_REPLIES) is laid out once complete, when it is one message; "
        "a picture the bot posts goes in a media gallery, its caption beside it",
    )
    stream_replies: bool = Field(
        default=True,
        description="Show answers while they are written: post the first words, then edit the message "
        "(false: post each answer once, complete)",
    )
    stream_interval: float = Field(
        default=1.5,
        ge=0.05,
        le=60,
        description="Seconds at least between two edits of an answer being written, with DISCORD_STREAM_REPLIES",
    )
    error_message: str = Field(
        default=say("discord.error"),
        description="What users read when a run fails (the details go to the log only); the default is in each "
        "chat's language",
    )
    channel_settings: Annotated[dict[str, dict[str, str]], NoDecode] = Field(
        default_factory=dict,
        description="Settings pinned per channel (or DM channel) that no chat command can change, as "
        "id:setting=value;setting=value pairs separated by commas (settings: model, persona, language, reply; an empty "
        "value pins the default), for example 123:model=gpt-4o-mini;persona=",
    )
    help_text: str = Field(
        default=say("discord.help"),
        description="The answer to /help; the default is in each chat's language",
    )

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")) or not re.search(r"/v\d+/?$", value):
            raise ValueError(
                f"DISCORD_API_URL must be an http(s) URL ending with the API version, like {DEFAULT_API_URL}; "
                f"got {value!r}"
            )
        return value.rstrip("/")

    @field_validator("gateway_url")
    @classmethod
    def _gateway_url(cls, value: str) -> str:
        if not value.startswith(("ws://", "wss://")):
            raise ValueError(f"DISCORD_GATEWAY_URL must be a ws(s) URL like {DEFAULT_GATEWAY_URL}; got {value!r}")
        return value

    @field_validator("shard_count", mode="before")
    @classmethod
    def _shard_count(cls, value: Any) -> Any:
        text = str(value).strip().lower()
        if text == "auto":
            return "auto"
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"DISCORD_SHARD_COUNT must be a number of shards (1 or more) or auto; got {value!r}")
        return int(text)

    @field_validator("allowed_guilds", "allowed_channels", "allowed_users", mode="before")
    @classmethod
    def _ids(cls, value: Any, info: Any) -> Any:
        return _parse_ids(value, f"DISCORD_{info.field_name.upper()}")

    @field_validator("channel_policies", mode="before")
    @classmethod
    def _policies(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("{"):
                return json.loads(text)
            pairs: dict[str, str] = {}
            for item in _split(text):
                key, sep, policy = item.partition(":")
                if not sep:
                    key, sep, policy = item.partition("=")
                if not sep or not key.strip() or not policy.strip():
                    raise ValueError(
                        "DISCORD_CHANNEL_POLICIES must be id:policy pairs separated by commas, "
                        f"for example 123:always,456:off; got {item!r}"
                    )
                pairs[key.strip()] = policy.strip().lower()
            return pairs
        return value

    def policy_for(self, *channel_ids: int | None) -> ReplyPolicy:
        """The reply policy of the first of ``channel_ids`` (a thread, then its parent) with an override."""
        for channel_id in channel_ids:
            if channel_id is not None and channel_id in self.channel_policies:
                return self.channel_policies[channel_id]
        return self.reply_policy

    @field_validator("channel_settings", mode="before")
    @classmethod
    def _channel_settings(cls, value: Any) -> Any:
        return parse_channel_settings(value, "DISCORD_CHANNEL_SETTINGS")
