"""Settings problems: one line per problem naming the variable; sources of ``bots config``; secrets masked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bots.config import check_connectivity, check_settings, load_settings, safe_url, settings_table
from bots.settings import Settings
from core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("settings_env")  # no setting from this machine, no .env but the test's own


def problems_of(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    head, *lines = str(exc.value).splitlines()
    assert head == "invalid settings:"
    return [line.strip() for line in lines]


def test_every_bad_value_is_one_line_naming_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_MAX_TOKENS", "lots")
    monkeypatch.setenv("BOT_MAX_STEPS", "0")
    monkeypatch.setenv("LOG_CONTENT", "maybe")
    monkeypatch.setenv("LLM_PROVIDER", "gpt")
    monkeypatch.setenv("HTTP_PORT", "99999")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    lines = problems_of(exc)
    assert len(lines) == 5, lines
    by_var = {line.split("=")[0].split(":")[0]: line for line in lines}
    assert set(by_var) == {"LLM_MAX_TOKENS", "BOT_MAX_STEPS", "LOG_CONTENT", "LLM_PROVIDER", "HTTP_PORT"}
    assert by_var["LLM_MAX_TOKENS"] == (
        "LLM_MAX_TOKENS='lots': input should be a valid integer, unable to parse string as an integer; "
        "fix it or unset it (default: 512)"
    )
    assert "'local', 'openai', 'anthropic' or 'scripted'" in by_var["LLM_PROVIDER"]
    assert "less than or equal to 65535" in by_var["HTTP_PORT"]


def test_no_number_setting_takes_infinity_or_nan() -> None:
    """Every float setting has an upper bound: ``inf`` (or ``nan``, ``1e300``) in a timeout, a TTL or a grace
    period passed the check and failed later, far from the setting (a socket's timeout, ``timedelta``, ``EXPIRE``)."""
    import pydantic

    def floats(model: type[pydantic.BaseModel], prefix: str = "") -> list[tuple[type[pydantic.BaseModel], str]]:
        found: list[tuple[type[pydantic.BaseModel], str]] = []
        for name, field in model.model_fields.items():
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, pydantic.BaseModel):
                found += floats(kind, f"{prefix}{name}.")
            elif kind in (float, float | None):
                found.append((model, name))
        return found

    checked = floats(Settings)
    assert len(checked) > 20
    for model, name in checked:
        for value in (float("inf"), float("nan")):
            with pytest.raises(pydantic.ValidationError):
                model.__pydantic_validator__.validate_assignment(model.model_construct(), name, value)


def test_a_bad_value_in_dotenv_is_reported_the_same_way(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("BOT_HISTORY=-3\n", encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert problems_of(exc) == [
        "BOT_HISTORY='-3': input should be greater than or equal to 0; fix it or unset it (default: 40)"
    ]


def test_a_discord_token_without_the_discord_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "MTIz.secret.discord")
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setitem(sys.modules, "discord", None)  # what an install without the extra looks like
    problems = check_settings(load_settings())
    assert problems == [
        "DISCORD_TOKEN is set but the discord extra is not installed: run pip install '.[discord]' "
        "or unset DISCORD_TOKEN"
    ]
    assert "MTIz.secret.discord" not in "".join(problems)


def test_database_url_is_checked_and_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setenv("DATABASE_URL", "mysql://bot:hunter2@db/bots")
    problems = check_settings(load_settings())
    assert problems == [
        "DATABASE_URL='mysql://bot:********@db/bots' is not a PostgreSQL URL: use postgresql://user:password@host/db"
    ]
    monkeypatch.setenv("DATABASE_URL", "postgresql://bot:hunter2@db/bots")
    assert not any("DATABASE_URL" in p for p in check_settings(load_settings(), role="worker"))
    monkeypatch.setitem(sys.modules, "psycopg", None)  # an install without the extra
    assert check_settings(load_settings()) == [
        "DATABASE_URL is set but the postgres extra is not installed: run pip install '.[postgres]' "
        "or unset DATABASE_URL"
    ]


def test_a_provider_without_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "anthropic")
    assert check_settings(load_settings()) == [
        "LLM_PROVIDER=anthropic needs LLM_API_KEY: set it to an Anthropic API key"
    ]
    monkeypatch.setenv("LLM_PROVIDER", "openai")
    monkeypatch.setenv("LLM_BASE_URL", "localhost:11434")
    problems = check_settings(load_settings())
    assert problems == [
        "LLM_BASE_URL='localhost:11434' is not an http(s) URL: use for example http://localhost:11434/v1"
    ]


def test_roles_need_their_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    settings = load_settings()
    assert check_settings(settings, role="run") == []
    assert check_settings(settings, role="worker") == []
    assert check_settings(settings, role="gateway") == [
        "bots gateway has no platform to listen to: set DISCORD_TOKEN and/or MATRIX_ACCESS_TOKEN and/or SLACK_BOT_TOKEN "
        "and/or TELEGRAM_TOKEN"
    ]
    monkeypatch.setenv("REDIS_URL", "http://:pw@127.0.0.1:6379")
    assert check_settings(load_settings(), role="worker") == [
        "REDIS_URL='http://:********@127.0.0.1:6379' is not a Redis URL: use redis://host:6379/0"
    ]
    assert check_settings(load_settings(), role="run") == []  # the embedded mode needs no Redis


def test_settings_table_names_the_source_of_each_value_and_masks_secrets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("BOT_NAME=Ada\nLLM_API_KEY=sk-from-dotenv-123456\n", encoding="utf-8")
    monkeypatch.setenv("TELEGRAM_TOKEN", "999:token-from-environment")
    monkeypatch.setenv("LLM_BASE_URL", "http://user:url-password-42@llm.internal:8000/v1")
    rows = {var: (shown, source) for var, shown, source in settings_table(load_settings())}
    assert rows["BOT_NAME"] == ("Ada", ".env")
    assert rows["LLM_API_KEY"] == ("********", ".env")
    assert rows["TELEGRAM_TOKEN"] == ("********", "environment")
    assert rows["DISCORD_TOKEN"] == ("(unset)", "default")
    assert rows["LLM_BASE_URL"] == ("http://user:********@llm.internal:8000/v1", "environment")
    assert rows["BOT_MAX_STEPS"] == ("5", "default")
    shown = repr(rows)
    for secret in ("sk-from-dotenv-123456", "token-from-environment", "url-password-42"):
        assert secret not in shown
    assert len(rows) == len(settings_table(Settings()))


def test_safe_url() -> None:
    assert safe_url("redis://:pw@redis:6379/0") == "redis://:********@redis:6379/0"
    assert safe_url("redis://redis:6379/0") == "redis://redis:6379/0"


async def test_connectivity_is_checked_only_where_redis_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fleet.server import free_port

    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    assert await check_connectivity(load_settings(), role="config") == []  # REDIS_URL at its default: not used
    url = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setenv("REDIS_URL", url)
    settings = load_settings()
    assert await check_connectivity(settings, role="run") == []
    assert await check_connectivity(settings, role="chat") == []
    for role in ("worker", "gateway", "config"):
        problems = await check_connectivity(settings, role=role, timeout=1.0)
        assert len(problems) == 1 and problems[0].startswith(f"REDIS_URL={url!r} does not answer (")


async def test_a_redis_url_that_does_not_answer_is_one_line_naming_redis_url(tmp_path: Path) -> None:
    from bots.config import _ping_redis
    from tests.fleet.server import RedisServer, free_port

    port = free_port()
    problem = await _ping_redis(f"redis://:hunter2@127.0.0.1:{port}/0", timeout=1.0)
    assert problem is not None
    assert problem.startswith(f"REDIS_URL='redis://:********@127.0.0.1:{port}/0' does not answer (")
    assert problem.endswith("): start Redis there or fix REDIS_URL")
    assert "hunter2" not in problem
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        assert await _ping_redis(server.url, timeout=1.0) is None
    finally:
        server.stop()


def test_log_settings_are_checked_before_logging_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setenv("LOG_LEVEL", "loud")
    monkeypatch.setenv("LOG_FORMAT", "xml")
    assert check_settings(load_settings()) == [
        "LOG_FORMAT='xml' is not text or json: set LOG_FORMAT=text or json",
        "LOG_LEVEL='loud' is not DEBUG, INFO, WARNING or ERROR",
    ]


def test_speech_to_text_settings_are_masked_checked_and_built(monkeypatch: pytest.MonkeyPatch) -> None:
    from bots.app import build_media
    from core.media import OpenAITranscriber

    monkeypatch.setenv("STT_API_KEY", "sk-stt-secret-0042")
    monkeypatch.setenv("STT_BASE_URL", "https://user:stt-password-7@stt.internal/v1")
    monkeypatch.setenv("STT_ECHO", "true")
    monkeypatch.setenv("MEDIA_MAX_IMAGE_MB", "2.5")
    monkeypatch.setenv("MEDIA_READ", "image, FILE")
    settings = load_settings()
    rows = {var: shown for var, shown, _ in settings_table(settings)}
    assert rows["STT_API_KEY"] == "********"
    assert "sk-stt-secret-0042" not in repr(rows) and "stt-password-7" not in repr(rows)
    media = build_media(settings)
    assert isinstance(media.transcriber, OpenAITranscriber) and media.echo
    assert media.limits.image_bytes == 2_500_000
    assert media.limits.kinds == {"image", "file"}
    assert "stt-password-7" not in repr(media.transcriber)
    monkeypatch.setenv("STT_BASE_URL", "ftp://stt.internal")
    assert check_settings(load_settings()) == [
        "STT_BASE_URL='ftp://stt.internal' is not an http(s) URL: use for example https://api.openai.com/v1"
    ]
    monkeypatch.delenv("STT_BASE_URL")
    unheard = build_media(load_settings())
    assert unheard.transcriber is None and not unheard.echo  # nothing to quote without speech to text


def test_bots_config_explains_how_the_platforms_spread_over_gateways(monkeypatch: pytest.MonkeyPatch) -> None:
    from bots.config import scaling_notes

    monkeypatch.setenv("DISCORD_TOKEN", "x")
    monkeypatch.setenv("DISCORD_SHARD_COUNT", "auto")
    monkeypatch.setenv("TELEGRAM_TOKEN", "1:x")
    [discord, telegram] = scaling_notes(load_settings())
    assert "recommended number of shards" in discord and "DISCORD_IDENTIFY_INTERVAL=5s" in discord
    assert "one bots gateway polls" in telegram
    monkeypatch.setenv("DISCORD_SHARD_COUNT", "16")
    monkeypatch.setenv("TELEGRAM_MODE", "webhook")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_URL", "https://bot.example.com/hook")
    monkeypatch.setenv("TELEGRAM_WEBHOOK_SECRET", "s3cret-" + "x" * 32)
    [discord, telegram] = scaling_notes(load_settings())
    assert discord.startswith("Discord: 16 shards (DISCORD_SHARD_COUNT)")
    assert "every bots gateway serves the webhook" in telegram
    monkeypatch.setenv("DISCORD_SHARD_COUNT", "0")
    with pytest.raises(ConfigError, match="DISCORD_SHARD_COUNT"):
        load_settings()


def test_admin_users_may_change_any_chat_s_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bots.app import build_agent
    from core.memory import InMemoryStore
    from extensions.chat.commands import Caller, ChatCommands

    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setenv("BOT_ADMIN_USERS", "telegram:42, discord:7")
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path))
    agent = build_agent(load_settings(), memory=InMemoryStore(), listen=False)
    assert agent.chat_policy.admin_users == {"telegram:42", "discord:7"}
    assert agent.is_admin("telegram:42") and not agent.is_admin("telegram:43")

    commands = ChatCommands(agent)
    assert commands.may_change(Caller(user="telegram:42", manages_chat=False))
    assert commands.may_change(Caller(user="discord:7", manages_chat=False))
    assert not commands.may_change(Caller(user="telegram:43", manages_chat=False))


def test_bots_config_with_redis_down_says_it_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Redis not answering is one problem: the next schedule firings, also read from Redis, are not tried."""
    from bots.cli import main
    from tests.fleet.server import free_port

    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    assert main(["config"]) == 1
    problems = capsys.readouterr().err.split("problems:", 1)[1].strip().splitlines()
    assert len(problems) == 1 and problems[0].strip().startswith("REDIS_URL="), problems
