"""Settings that are valid but weak together, for ``bots config`` to warn about (and ``--strict`` to refuse), and
fresh secrets worth their name (``bots config --generate-secret``).

Each warning is one line that names the variables and says what to change. None stops ``bots run``: a bot on a
trusted network may mean it; ``bots config --strict`` (in CI, before a deploy) makes them failures.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from extensions.platforms import all_platforms
from extensions.web.guard import is_loopback
from extensions.web.settings import WebSettings

from .config import platform_settings

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ("STRONG_SECRET", "generate_secret", "is_weak_secret", "weak_settings")

STRONG_SECRET = 32
"""Characters a secret has at least to count as strong where anyone on the network may guess it."""


def generate_secret() -> str:
    """A fresh secret for ``TELEGRAM_WEBHOOK_SECRET``, ``CONSOLE_SECRET`` or ``WEB_SECRET``: 43 characters of
    A-Z a-z 0-9 _ - (32 random bytes), which every one of them accepts."""
    return secrets.token_urlsafe(32)


def is_weak_secret(secret: str) -> bool:
    """Shorter than ``STRONG_SECRET``, or repetitive: few distinct characters, or one short piece repeated
    (``abcdabcdabcdabcd``)."""
    if len(secret) < STRONG_SECRET or len(set(secret)) < 10:
        return True
    return any(len(secret) % n == 0 and secret == secret[:n] * (len(secret) // n) for n in range(1, 9))


def weak_settings(settings: Settings) -> list[str]:
    """One line per weak combination of ``settings``: a guessable console secret on a network without secure
    cookies, a public web chat without per-user limits, and what each platform finds weak in its own settings
    (``Platform.warnings``: a Telegram webhook secret sent over http://)."""
    warnings: list[str] = []
    console = settings.console
    secret = console.secret.get_secret_value().strip() if console.secret is not None else ""
    if secret and console.port and not is_loopback(console.host) and is_weak_secret(secret):
        cookies = "" if console.secure_cookies else " and CONSOLE_SECURE_COOKIES is false (the cookie travels in clear)"
        warnings.append(
            f"CONSOLE_SECRET is short or repetitive while CONSOLE_HOST={console.host} lets other machines in{cookies}: "
            f"use {STRONG_SECRET} random characters or more (bots config --generate-secret prints one), serve the "
            "console behind HTTPS with CONSOLE_SECURE_COOKIES=true, or keep CONSOLE_HOST=127.0.0.1"
        )
    web = settings.group(WebSettings)
    if web.chat_enabled and web.port and not is_loopback(web.host):
        off = [name for name, value in _per_user_limits(settings) if not value]
        if off:
            warnings.append(
                f"the web chat is public (WEB_HOST={web.host}) without per-user limits ({', '.join(off)} = 0): any "
                "visitor may spend the model without bound; set them, or keep WEB_HOST=127.0.0.1"
            )
        if not web.secure_cookies:
            warnings.append(
                f"the web chat is public (WEB_HOST={web.host}) and WEB_SECURE_COOKIES is false: serve it behind HTTPS "
                "and set WEB_SECURE_COOKIES=true, so a visitor's cookie never travels in clear"
            )
    for found in all_platforms():
        warnings += found.warnings(platform_settings(settings, found))
    return warnings


def _per_user_limits(settings: Settings) -> list[tuple[str, int]]:
    bot = settings.bot
    return [
        ("BOT_MESSAGES_PER_MINUTE", bot.messages_per_minute),
        ("BOT_TOKENS_PER_DAY_USER", bot.tokens_per_day_user),
    ]
