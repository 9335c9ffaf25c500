"""Operator settings of the web chat (``WEB_*``)."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

__all__ = ("DEFAULT_PORT", "WebSettings", "listen_address")

DEFAULT_PORT = 8765
"""The web chat's port when ``WEB_PORT`` is not set (a busy default port turns the chat off with a warning; a busy
port set on purpose stops the bot)."""


class WebSettings(BaseModel):
    """``WEB_*`` environment variables."""

    chat_enabled: bool = Field(
        default=True, description="Serve the web chat, a page where anyone who reaches it talks to the bot"
    )
    host: str = Field(
        default="127.0.0.1",
        description="Address the web chat listens on (0.0.0.0 to let other machines in, behind HTTPS)",
    )
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535, description="Port of the web chat (0: turned off)")
    secret: SecretStr | None = Field(
        default=None,
        description="Key signing the visitors' cookies, 32 characters or more (empty: generated once in "
        "BOT_DATA_DIR/web_secret; every gateway of a fleet needs the same one) (secret)",
    )
    stream_interval: float = Field(
        default=0.05, ge=0.0, le=10, description="Seconds at least between two updates of an answer being written"
    )
    max_chars: int = Field(default=4000, ge=1, le=100_000, description="Characters of one message at most")
    secure_cookies: bool = Field(
        default=False, description="Send the visitor's cookie over HTTPS only (set it when served behind HTTPS)"
    )
    title: str = Field(default="", description="The page's title (empty: the bot's name)")
    new_visitors_per_hour: int = Field(
        default=30,
        ge=0,
        le=1_000_000,
        description="New visitors (new cookies) one address may start per hour at most, counted in Redis for the "
        "whole fleet (REDIS_URL) or in the one process: past it the page says to try later, so clearing cookies "
        "does not give endless fresh per-user limits (0: no limit)",
    )
    visitor_idle_days: float = Field(
        default=30.0,
        ge=0,
        le=3650,
        description="Days a web visitor's identity lasts after their last visit: then their conversation is "
        "forgotten (memory, history, settings, reminders, and its Redis keys in a fleet) and their cookie has "
        "expired (0: kept forever)",
    )
    visitor_tier: Literal["guest", "member"] = Field(
        default="guest",
        description="The trust tier of a web visitor's messages, guest or member: an action or MCP tool above it "
        "(ACTIONS_POLICY; by default actions are for members, MCP tools for admins) never runs for a visitor, "
        "since anyone who reaches the page is one",
    )
    schedules: bool = Field(
        default=False,
        description="Let web visitors set reminders and scheduled messages: they fire with no page open, so any "
        "visitor could start model calls that never stop; off, set_reminder is refused in the web chat",
    )
    header_timeout: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Seconds a client has to send a request's headers, then as long for its body, to the web chat "
        "and the console; a half-sent request is dropped, and so is a kept-alive connection idle that long",
    )
    max_connections: int = Field(
        default=256,
        ge=1,
        le=1_000_000,
        description="Connections open at once at most on the web chat and on the console, each (open pages' event "
        "streams count); one more is answered 503",
    )
    max_per_address: int = Field(
        default=32,
        ge=1,
        le=1_000_000,
        description="Connections open at once from one address (an IPv6 /64) on the web chat and on the console, "
        "each; behind WEB_TRUSTED_PROXIES, requests in progress per visitor they name (event streams count); one "
        "more is answered 503, so one client cannot take every connection",
    )
    trusted_proxies: Annotated[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...], NoDecode] = Field(
        default=(),
        description="Addresses or networks (10.0.0.0/8) of the reverse proxies in front of the web chat, "
        "comma-separated: from them, X-Forwarded-For names the visitor's address (else it is ignored)",
    )

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _networks(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in value.split(",") if part.strip())
        except ValueError as exc:
            raise ValueError(f"{exc}; give addresses or networks, for example 10.0.0.0/8,192.168.1.5") from None

    @field_validator("host")
    @classmethod
    def _an_address(cls, value: str) -> str:
        return listen_address(value)

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and 0 < len(value.get_secret_value().strip()) < 32:
            raise ValueError("WEB_SECRET is too short: give it 32 characters or more (or leave it empty)")
        return value

    @property
    def configured(self) -> bool:
        """The operator set ``WEB_CHAT_ENABLED``, ``WEB_HOST`` or ``WEB_PORT``: the web chat then counts in
        ``/readyz``, and a fleet (``bots gateway``, ``bots worker``) serves it (``bots run`` serves it anyway)."""
        return bool({"chat_enabled", "host", "port"} & self.model_fields_set)

    @property
    def in_fleet(self) -> bool:
        """A fleet serves the web chat: configured, enabled and with a port."""
        return self.configured and self.chat_enabled and self.port != 0


def listen_address(value: str) -> str:
    """The address a server of the bot listens on (``WEB_HOST``, ``CONSOLE_HOST``): an empty one is refused, since
    aiohttp would listen on every interface."""
    if not value.strip():
        raise ValueError("give an address: 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)")
    return value.strip()
