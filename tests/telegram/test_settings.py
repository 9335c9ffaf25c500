"""``TELEGRAM_*`` settings, the package's public API, and importing it without python-telegram-bot."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pydantic
import pytest

import extensions.telegram
from bots.settings import Settings
from extensions.chat import ReplyPolicy
from extensions.telegram import TelegramMode, TelegramSettings


def test_the_environment_sets_every_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "TELEGRAM_TOKEN": "42:secret-token",
        "TELEGRAM_API_URL": "http://tg-api.internal:8081/",
        "TELEGRAM_MODE": "webhook",
        "TELEGRAM_WEBHOOK_URL": "https://bot.example.com/tg/hook",
        "TELEGRAM_WEBHOOK_LISTEN": "0.0.0.0",
        "TELEGRAM_WEBHOOK_PORT": "8080",
        "TELEGRAM_WEBHOOK_SECRET": "hook-secret_1-0123456789abcdef0123456789",
        "TELEGRAM_REPLY_POLICY": "always",
        "TELEGRAM_ALLOWED_CHATS": "1, -1002003",
        "TELEGRAM_ALLOWED_USERS": "[5, 6]",
        "TELEGRAM_MAX_RETRIES": "9",
        "TELEGRAM_STREAM_REPLIES": "false",
        "TELEGRAM_STREAM_INTERVAL": "0.5",
        "TELEGRAM_STREAM_DRAFTS": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    telegram = Settings(_env_file=None).telegram  # type: ignore[call-arg]
    assert telegram.token is not None and telegram.token.get_secret_value() == "42:secret-token"
    assert telegram.base_url == "http://tg-api.internal:8081/bot"
    assert telegram.mode is TelegramMode.WEBHOOK
    assert (telegram.webhook_listen, telegram.webhook_port, telegram.listen_path) == ("0.0.0.0", 8080, "/tg/hook")
    assert telegram.reply_policy is ReplyPolicy.ALWAYS
    assert telegram.allowed_chats == {1, -1002003}
    assert telegram.allowed_users == {5, 6}
    assert telegram.max_retries == 9
    assert (telegram.stream_replies, telegram.stream_interval, telegram.stream_drafts) == (False, 0.5, True)
    shown = repr(telegram) + str(telegram.model_dump())
    assert "secret-token" not in shown and "hook-secret_1-0123456789abcdef0123456789" not in shown


def test_defaults_answer_pending_updates_by_long_polling() -> None:
    settings = TelegramSettings()
    assert settings.mode is TelegramMode.POLLING
    assert not settings.drop_pending_updates
    assert settings.reply_policy is ReplyPolicy.MENTION
    assert settings.allowed_chats == frozenset() and settings.allowed_users == frozenset()
    assert settings.base_url == "https://api.telegram.org/bot"
    assert (settings.stream_replies, settings.stream_interval, settings.stream_drafts) == (True, 1.5, False)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"mode": "webhook", "webhook_secret": "abc"}, "TELEGRAM_WEBHOOK_URL"),
        ({"mode": "webhook", "webhook_url": "https://x.org/hook"}, "TELEGRAM_WEBHOOK_SECRET"),
        (
            {"mode": "webhook", "webhook_url": "https://x.org/hook", "webhook_secret": "no spaces"},
            "TELEGRAM_WEBHOOK_SECRET",
        ),
        ({"api_url": "api.telegram.org"}, "TELEGRAM_API_URL"),
    ],
)
def test_mistakes_name_the_variable(values: dict[str, str], named: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=named):
        TelegramSettings(**values)  # type: ignore[arg-type]


def test_webhook_secret_shorter_than_32_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from bots.config import load_settings
    from core.errors import ConfigError

    hook = {"mode": "webhook", "webhook_url": "https://x.org/hook"}
    for short in ("a", "x" * 31):
        with pytest.raises(pydantic.ValidationError, match="TELEGRAM_WEBHOOK_SECRET is"):
            TelegramSettings(**hook, webhook_secret=short)  # type: ignore[arg-type]
    monkeypatch.setenv("TELEGRAM_MODE", "webhook")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_URL", "https://x.org/hook")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "Zq9-Zq9-Zq9")
    with pytest.raises(ConfigError) as info:
        load_settings(_env_file=None)
    said = str(info.value)
    assert "TELEGRAM_WEBHOOK_SECRET is 11 characters" in said and "at least 32" in said
    assert "bots config --generate-secret" in said and "Zq9" not in said  # the secret itself is never repeated
    accepted = TelegramSettings(**hook, webhook_secret="x" * 32)  # type: ignore[arg-type]
    assert accepted.webhook_secret is not None
    TelegramSettings(webhook_secret="a")  # polling: the webhook secret is not used, nothing to refuse


def test_generate_secret_gives_a_webhook_secret_telegram_accepts() -> None:
    from bots.hardening import generate_secret

    fresh = {generate_secret() for _ in range(20)}
    assert len(fresh) == 20  # never the same twice
    for secret in fresh:
        assert len(secret) >= 32
        TelegramSettings(mode="webhook", webhook_url="https://x.org/hook", webhook_secret=secret)  # type: ignore[arg-type]


def test_every_setting_is_described() -> None:
    assert all(field.description for field in TelegramSettings.model_fields.values())


def test_public_api_is_sorted_and_complete() -> None:
    names = extensions.telegram.__all__

    def isort_style(name: str) -> tuple[int, str]:  # ruff's RUF022 order: CONSTANTS, Classes, functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(names) == sorted(names, key=isort_style)
    assert all(hasattr(extensions.telegram, name) for name in names)


def test_importable_without_python_telegram_bot() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["telegram"] = None  # as if the extra were not installed
        import extensions.telegram as tg
        from extensions.telegram.settings import TelegramSettings
        from extensions.telegram.render import render_html
        from core.errors import ConfigError
        assert render_html("**x**") == "<b>x</b>"
        try:
            tg.telegram_extension(TelegramSettings(token="1:a"))
        except ConfigError as exc:
            assert "daydreams-bots[telegram]" in str(exc), exc
        else:
            raise SystemExit("expected a ConfigError")
        assert "telegram.ext" not in sys.modules
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.strip() == "ok", done.stderr
