"""Secrets worth their name: ``bots config --generate-secret`` prints a fresh one."""

from __future__ import annotations

import secrets

__all__ = ("generate_secret",)


def generate_secret() -> str:
    """A fresh secret for ``TELEGRAM_WEBHOOK_SECRET``, ``CONSOLE_SECRET`` or ``WEB_SECRET``: 43 characters of
    A-Z a-z 0-9 _ - (32 random bytes), which every one of them accepts."""
    return secrets.token_urlsafe(32)
