"""``WEBHOOKS_*``: events other systems post to ``/hooks/<name>`` that start a turn in a chat (``core.webhooks``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from .setting_values import json_list

__all__ = ("WebhookSourceSetting", "WebhooksSettings", "parse_sources")


class WebhookSourceSetting(BaseModel):
    """One entry of ``WEBHOOKS_SOURCES``."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """``POST /hooks/<name>``."""
    secret: SecretStr
    """The shared secret (at least 16 characters); shown masked."""
    scheme: Literal["hmac", "github"] = "hmac"
    """``hmac``: X-Webhook-Signature over timestamp + body; ``github``: X-Hub-Signature-256."""
    channel: str
    """Where the bot speaks: ``telegram:<chat id>`` (``:<topic id>``) or ``discord:<channel id>``."""
    prompt: str = Field(min_length=1, max_length=2000)
    """What the bot is asked to do with the event (its payload follows, as data)."""
    tier: Literal["owner", "admin", "member", "guest", "bot"] = "guest"
    """The trust tier of the event (which actions it may lead to)."""
    per_minute: int | None = Field(default=None, ge=1, le=10_000)
    """Requests a minute (default ``WEBHOOKS_PER_MINUTE``)."""

    @field_validator("secret")
    @classmethod
    def _long(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 16:
            raise ValueError("a secret must be at least 16 characters (openssl rand -hex 32 makes one)")
        return value

    @field_validator("channel")
    @classmethod
    def _channel(cls, value: str) -> str:
        from .schedules import address_of_channel

        address_of_channel(value)
        return value


def parse_sources(value: Any) -> Any:
    """``WEBHOOKS_SOURCES`` as the environment gives it (a JSON list, or empty)."""
    return json_list(
        value,
        setting="WEBHOOKS_SOURCES",
        example='[{"name": "ci", "secret": "...", "channel": "telegram:-100123", '
        '"prompt": "Tell the team what failed"}]',
        what="sources",
    )


class WebhooksSettings(BaseModel):
    """``WEBHOOKS_*``: ``POST /hooks/<name>`` on the HTTP endpoint (``HTTP_PORT``) of ``bots run`` and ``bots
    gateway``, each source signed with its own secret, its events answered in the chat it names."""

    enabled: bool = Field(default=False, description="Take events at /hooks/<name> (plugins.webhooks())")
    sources: Annotated[tuple[WebhookSourceSetting, ...], NoDecode] = Field(
        default=(),
        description='The sources, a JSON list: [{"name": "ci", "secret": "<16+ characters>", "scheme": "hmac" or '
        '"github", "channel": "telegram:<chat id>", "prompt": "What to do with the event", "tier": "guest"}] '
        "(secrets masked)",
    )
    max_bytes: int = Field(default=256_000, ge=1, le=10_000_000, description="The largest body taken, bytes")
    tolerance: float = Field(
        default=300.0, gt=0, le=3600, description="Seconds a signed timestamp may be from now (hmac scheme)"
    )
    per_minute: int = Field(default=30, ge=1, le=10_000, description="Signed requests a source may send a minute")
    dedupe_seconds: float = Field(
        default=259_200.0,
        ge=60,
        le=30 * 86400,
        description="Seconds a delivery is remembered, so a replay of it is refused (GitHub redelivers for 3 days)",
    )
    payload_chars: int = Field(
        default=4000, ge=100, le=100_000, description="Characters of an event's payload the model reads"
    )

    @field_validator("sources", mode="before")
    @classmethod
    def _sources(cls, value: Any) -> Any:
        return parse_sources(value)
