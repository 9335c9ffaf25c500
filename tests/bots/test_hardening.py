"""``bots config`` warns about settings that are valid but weak together (``bots.hardening``)."""

from __future__ import annotations

import pytest

from bots.config import load_settings
from bots.hardening import generate_secret, is_weak_secret, weak_settings

STRONG = "Vq3-kL9_xT2mWp7rZb4nYc8sHd6fJg1eQa5u"


@pytest.fixture(autouse=True)
def _no_settings_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")  # no .env


def test_weak_secrets() -> None:
    assert is_weak_secret("a" * 40) and is_weak_secret("abcdabcdabcdabcdabcdabcdabcdabcdabcd")
    assert is_weak_secret("0123456789abcdef")  # 16 characters: short
    assert not is_weak_secret(STRONG) and not is_weak_secret(generate_secret())


def test_a_short_repetitive_console_secret_on_a_public_host_without_secure_cookies_is_warned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONSOLE_SECRET", "abcdabcdabcdabcd")
    assert weak_settings(load_settings()) == []  # on loopback: only this machine may guess
    monkeypatch.setenv("CONSOLE_HOST", "0.0.0.0")
    [warning] = weak_settings(load_settings())
    assert warning.startswith("CONSOLE_SECRET is short or repetitive while CONSOLE_HOST=0.0.0.0")
    assert "CONSOLE_SECURE_COOKIES is false" in warning and "bots config --generate-secret" in warning
    assert "abcd" not in warning  # the secret itself is never shown
    monkeypatch.setenv("CONSOLE_SECRET", STRONG)
    monkeypatch.setenv("CONSOLE_SECURE_COOKIES", "true")
    assert weak_settings(load_settings()) == []


def test_a_public_web_chat_without_per_user_limits_is_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEB_HOST", "0.0.0.0")
    monkeypatch.setenv("WEB_SECURE_COOKIES", "true")
    [warning] = weak_settings(load_settings())
    assert "the web chat is public (WEB_HOST=0.0.0.0) without per-user limits" in warning
    assert "BOT_MESSAGES_PER_MINUTE, BOT_TOKENS_PER_DAY_USER = 0" in warning
    monkeypatch.setenv("BOT_MESSAGES_PER_MINUTE", "10")
    monkeypatch.setenv("BOT_TOKENS_PER_DAY_USER", "20000")
    assert weak_settings(load_settings()) == []
    monkeypatch.setenv("WEB_SECURE_COOKIES", "false")
    [warning] = weak_settings(load_settings())
    assert "WEB_SECURE_COOKIES is false" in warning


def test_a_webhook_secret_on_http_is_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_MODE", "webhook")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", generate_secret())
    monkeypatch.setenv("TELEGRAM_WEBHOOK_URL", "http://bot.example.com/hook")
    [warning] = weak_settings(load_settings())
    assert warning.startswith("TELEGRAM_WEBHOOK_URL is http://") and "https://" in warning
    monkeypatch.setenv("TELEGRAM_WEBHOOK_URL", "https://bot.example.com/hook")
    assert weak_settings(load_settings()) == []
