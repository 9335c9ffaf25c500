"""Operator settings of the Telegram adapter (``TELEGRAM_*``). Importing this needs no python-telegram-bot."""

from __future__ import annotations

import enum
import json
import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from ..chat.commands import parse_channel_settings
from ..chat.exactly_once import Uncertain
from ..chat.i18n import say
from ..chat.policy import ReplyPolicy

__all__ = ("WEBHOOK_DEADLINE", "WEBHOOK_SECRET_MIN", "TelegramMode", "TelegramSettings")

_SECRET_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
WEBHOOK_DEADLINE = 20.0
"""Seconds an update may take to be handled by the gateway's webhook server (``webhook.WebhookServer``) before
Telegram is told to deliver it again (503). Telegram gives up on a webhook request after about a minute and counts
that against the webhook."""
WEBHOOK_SECRET_MIN = 32
"""The shortest ``TELEGRAM_WEBHOOK_SECRET`` accepted: a short one is guessed (one character fell in 11 requests, and
a forged update then runs as whichever user it claims). ``secrets.token_urlsafe(32)`` gives 43 characters."""


class TelegramMode(enum.StrEnum):
    """How updates reach the bot."""

    POLLING = "polling"
    """Long polling with ``getUpdates``: works anywhere, needs no public address."""
    WEBHOOK = "webhook"
    """Telegram posts updates to a public HTTPS URL; the bot listens behind it."""


IdSet = Annotated[frozenset[int], NoDecode]
"""A set of chat or user ids, read from the environment as ``1,2,-1003`` or a JSON list."""


class TelegramSettings(BaseModel):
    """``TELEGRAM_*`` environment variables."""

    token: SecretStr | None = Field(default=None, description="Bot token from @BotFather (secret)")
    api_url: str = Field(
        default="https://api.telegram.org",
        description="Base URL of the Bot API server, scheme and host (and port) only: the bot adds /bot<token>/; "
        "set it for a self-hosted telegram-bot-api server, or a fake one in tests (http://127.0.0.1:8081)",
    )
    mode: TelegramMode = Field(
        default=TelegramMode.POLLING, description="How updates arrive: polling (default) or webhook"
    )
    poll_timeout: int = Field(default=30, ge=1, le=50, description="Seconds one getUpdates long poll may wait")
    drop_pending_updates: bool = Field(
        default=False, description="Discard updates that arrived while the bot was down (default: answer them)"
    )
    webhook_url: str | None = Field(
        default=None, description="Public HTTPS URL Telegram posts updates to (webhook mode)"
    )
    webhook_listen: str = Field(
        default="127.0.0.1", description="Address the webhook server listens on (0.0.0.0 in a container)"
    )
    webhook_port: int = Field(default=8443, ge=1, le=65535, description="Port the webhook server listens on")
    webhook_path: str | None = Field(
        default=None, description="Path the webhook server answers on (default: the path of TELEGRAM_WEBHOOK_URL)"
    )
    webhook_secret: SecretStr | None = Field(
        default=None,
        description="Secret Telegram sends in every webhook request, 32-256 of A-Z a-z 0-9 _ - "
        "(bots config --generate-secret prints one) (secret)",
    )
    reply_policy: ReplyPolicy = Field(
        default=ReplyPolicy.MENTION, description="When to answer in groups: always, mention or off"
    )
    allowed_chats: IdSet = Field(
        default=frozenset(), description="Only these chat ids get answers, comma-separated (empty: all chats)"
    )
    allowed_users: IdSet = Field(
        default=frozenset(), description="Only these user ids get answers, comma-separated (empty: all users)"
    )
    rate_limit: float = Field(
        default=30.0,
        ge=0,
        le=10_000,
        description="Requests per second to Telegram at most, for the whole bot (0: no limit)",
    )
    group_rate_limit: float = Field(
        default=20.0, ge=0, le=10_000, description="Messages per minute at most in one group (0: no limit)"
    )
    max_retries: int = Field(
        default=5, ge=0, le=50, description="Retries of a request Telegram refused with 429 (Too Many Requests)"
    )
    request_timeout: float = Field(
        default=15.0, gt=0, le=600, description="Seconds a request to the Bot API may take before it fails"
    )
    typing_interval: float = Field(
        default=4.0, gt=0, le=5.0, description="Seconds between 'typing' actions while answering (one lasts 5 s)"
    )
    max_concurrent: int = Field(
        default=64, ge=1, description="Chats answered at the same time at most; more wait their turn"
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
        description="Seconds at least between two edits of an answer being written, with TELEGRAM_STREAM_REPLIES; "
        "in groups TELEGRAM_GROUP_RATE_LIMIT applies too",
    )
    rich_messages: bool = Field(
        default=True,
        description="Post an answer with structure (a table, headings, lists, code) as a rich message "
        "(sendRichMessage, Bot API 10.1), falling back to formatted text where Telegram refuses it; an answer shown "
        "while written (TELEGRAM_STREAM_REPLIES) is edited into one once complete, when it is one message",
    )
    guest_mode: bool = Field(
        default=False,
        description="Answer guest requests (Bot API 10.0 guest mode, also turned on for the bot in @BotFather): a "
        "person mentions the bot in a chat it is not part of; the bot sees that request alone, keeps nothing of it, "
        "and counts it to that person (trust tier summoned)",
    )
    stream_drafts: bool = Field(
        default=False,
        description="In private chats, show an answer being written as a draft (sendMessageDraft) and post it "
        "once complete, instead of posting and editing it; falls back to editing where the Bot API refuses drafts",
    )
    uncertain_replies: Uncertain = Field(
        default=Uncertain.RESEND,
        description="With a queue: a reply a crashed worker sent and never heard back about (Telegram has no "
        "idempotency key, so it may or may not be shown): resend (default: never lost, maybe shown twice) or skip "
        "(never twice, maybe missing); counted in bots_replies_uncertain_total",
    )
    channel_settings: Annotated[dict[str, dict[str, str]], NoDecode] = Field(
        default_factory=dict,
        description="Settings pinned per chat that no chat command can change, as "
        "id:setting=value;setting=value pairs separated by commas (settings: model, persona, language, reply; an empty "
        "value pins the default), for example 123:model=gpt-4o-mini;persona=",
    )
    help_text: str = Field(
        default=say("telegram.help"),
        description="Answer to /start and /help ({name} is the bot's name); the default is in each chat's language",
    )

    @field_validator("allowed_chats", "allowed_users", mode="before")
    @classmethod
    def _split_ids(cls, value: Any) -> Any:
        """Accept ``1,2,3`` (the environment's form), a JSON list, or any collection."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        if isinstance(value, int):
            return [value]
        return value

    @field_validator("api_url")
    @classmethod
    def _check_api_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("TELEGRAM_API_URL must be an http(s) URL such as https://api.telegram.org")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_webhook(self) -> TelegramSettings:
        if self.mode is not TelegramMode.WEBHOOK:
            return self
        if not self.webhook_url or urlsplit(self.webhook_url).scheme not in ("http", "https"):
            raise ValueError(
                "TELEGRAM_WEBHOOK_URL must be the public https:// URL Telegram posts to when "
                "TELEGRAM_MODE=webhook (or use TELEGRAM_MODE=polling)"
            )
        secret = self.webhook_secret.get_secret_value() if self.webhook_secret is not None else ""
        if not _SECRET_TOKEN.match(secret):
            raise ValueError(
                "TELEGRAM_WEBHOOK_SECRET is required when TELEGRAM_MODE=webhook: "
                f"{WEBHOOK_SECRET_MIN} to 256 characters of A-Z, a-z, 0-9, _ and - "
                "(bots config --generate-secret prints a fresh one)"
            )
        if len(secret) < WEBHOOK_SECRET_MIN:
            raise ValueError(
                f"TELEGRAM_WEBHOOK_SECRET is {len(secret)} characters: a secret that short is guessed, and a forged "
                f"update runs as whoever it claims to be; use at least {WEBHOOK_SECRET_MIN} "
                "(bots config --generate-secret prints a fresh one)"
            )
        return self

    @property
    def base_url(self) -> str:
        """The Bot API method URL prefix the token is appended to."""
        return f"{self.api_url}/bot"

    @property
    def base_file_url(self) -> str:
        """The file download URL prefix the token is appended to."""
        return f"{self.api_url}/file/bot"

    @property
    def listen_path(self) -> str:
        """The path the webhook server answers on."""
        if self.webhook_path is not None:
            return "/" + self.webhook_path.strip("/")
        path = urlsplit(self.webhook_url or "").path
        return "/" + path.strip("/")

    @field_validator("channel_settings", mode="before")
    @classmethod
    def _channel_settings(cls, value: Any) -> Any:
        return parse_channel_settings(value, "TELEGRAM_CHANNEL_SETTINGS")
