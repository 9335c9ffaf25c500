"""Settings from the environment, the package's public API, error translation, importing without discord.py."""

from __future__ import annotations

import subprocess
import sys
import types

import pydantic
import pytest

import extensions.discord
from bots.settings import Settings
from core.errors import ConfigError, PlatformError
from extensions.chat import ReplyPolicy
from extensions.discord import DiscordSettings, definitions
from extensions.discord._lib import discord
from extensions.discord.platform_errors import INTENT_HELP, platform_error
from extensions.discord.posting import nonce_for


def test_env_lists_and_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "secret-token")
    monkeypatch.setenv("DISCORD_ALLOWED_CHANNELS", "1, 2")
    monkeypatch.setenv("DISCORD_ALLOWED_GUILDS", "[3]")
    monkeypatch.setenv("DISCORD_ALLOWED_USERS", "4")
    monkeypatch.setenv("DISCORD_CHANNEL_POLICIES", "5:always, 6=OFF")
    monkeypatch.setenv("DISCORD_REPLY_POLICY", "off")
    monkeypatch.setenv("DISCORD_ALLOW_BOTS", "true")
    monkeypatch.setenv("DISCORD_BOT_HOP_LIMIT", "7")
    monkeypatch.setenv("DISCORD_API_URL", "http://proxy:8080/api/v10")
    monkeypatch.setenv("DISCORD_GATEWAY_URL", "ws://gateway-proxy:7878/")
    monkeypatch.setenv("DISCORD_STREAM_REPLIES", "false")
    monkeypatch.setenv("DISCORD_STREAM_INTERVAL", "2.5")
    settings = Settings(_env_file=None).discord  # type: ignore[call-arg]
    assert settings.allowed_channels == {1, 2}
    assert settings.allowed_guilds == {3}
    assert settings.allowed_users == {4}
    assert settings.channel_policies == {5: ReplyPolicy.ALWAYS, 6: ReplyPolicy.OFF}
    assert settings.reply_policy is ReplyPolicy.OFF
    assert settings.allow_bots is True and settings.bot_hop_limit == 7
    assert settings.api_url == "http://proxy:8080/api/v10"
    assert settings.gateway_url == "ws://gateway-proxy:7878/"
    assert (settings.stream_replies, settings.stream_interval) == (False, 2.5)
    assert (DiscordSettings().stream_replies, DiscordSettings().stream_interval) == (True, 1.5)
    assert "secret-token" not in repr(settings)
    assert settings.policy_for(99, 5) is ReplyPolicy.ALWAYS  # a thread follows its parent
    assert settings.policy_for(99) is ReplyPolicy.OFF


def test_empty_env_lists_allow_everyone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_ALLOWED_CHANNELS", "")
    assert Settings(_env_file=None).discord.allowed_channels == frozenset()  # type: ignore[call-arg]


def test_bad_ids_name_the_variable() -> None:
    with pytest.raises(pydantic.ValidationError, match="DISCORD_ALLOWED_USERS must be Discord ids"):
        DiscordSettings(allowed_users="alice,bob")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError, match="DISCORD_CHANNEL_POLICIES must be id:policy pairs"):
        DiscordSettings(channel_policies="123")  # type: ignore[arg-type]


def test_bad_urls_name_the_variable() -> None:
    with pytest.raises(pydantic.ValidationError, match="DISCORD_API_URL must be an http"):
        DiscordSettings(api_url="http://proxy:8080")
    with pytest.raises(pydantic.ValidationError, match="DISCORD_GATEWAY_URL must be a ws"):
        DiscordSettings(gateway_url="https://gateway.discord.gg")
    assert DiscordSettings(api_url="http://proxy:8080/api/v10/").api_url == "http://proxy:8080/api/v10"


def test_every_setting_is_described() -> None:
    missing = [name for name, field in DiscordSettings.model_fields.items() if not field.description]
    assert missing == []


def test_public_api_is_sorted_and_complete() -> None:
    names = extensions.discord.__all__

    def isort_key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(names) == sorted(names, key=isort_key)
    internal = {"Runtime", "bind_runtime"}  # used by the extension itself
    assert set(definitions.__all__) - internal <= set(names)
    assert {"DiscordSettings", "discord_extension", "discord_runtime"} <= set(names)
    for name in names:
        assert hasattr(extensions.discord, name)


def test_importing_needs_no_discord_py() -> None:
    code = (
        "import sys; sys.modules['discord'] = None\n"
        "import extensions.discord as d\n"
        "from bots.settings import Settings\n"
        "from core.errors import ConfigError\n"
        "assert d.discord_channel.type == 'discord:channel'\n"
        "try:\n"
        "    d.discord_extension(d.DiscordSettings(token='x'))\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install 'daydreams-bots[discord]'" in result.stdout


def _response(status: int, reason: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(status=status, reason=reason)


def test_library_errors_become_ours_with_advice() -> None:
    forbidden = platform_error(
        discord.Forbidden(_response(403, "Forbidden"), {"code": 50013, "message": "Missing Permissions"}),
        "post a message in channel 5",
    )
    assert isinstance(forbidden, PlatformError)
    assert "Send Messages" in str(forbidden) and "50013" in str(forbidden)
    login = platform_error(discord.LoginFailure("Improper token has been passed."), "log in")
    assert isinstance(login, ConfigError) and "DISCORD_TOKEN" in str(login)
    intents = platform_error(discord.PrivilegedIntentsRequired(None), "connect")
    assert isinstance(intents, ConfigError) and str(intents) == INTENT_HELP
    timeout = platform_error(TimeoutError(), "post")
    assert "DISCORD_REQUEST_TIMEOUT" in str(timeout)
    network = platform_error(ConnectionRefusedError(111, "Connection refused"), "log in")
    assert "DISCORD_API_URL" in str(network)


def test_nonces_are_short_stable_and_distinct() -> None:
    assert nonce_for("k", 0) == nonce_for("k", 0)
    assert len({nonce_for("k", i) for i in range(100)} | {nonce_for("j", 0)}) == 101
    assert all(len(nonce_for("x" * 500, i)) <= 25 for i in range(5))
