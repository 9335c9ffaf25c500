"""A variable with a settings prefix that no setting reads is a warning naming the closest real one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bots.docs import settings_variables
from bots.unknown_env import unknown_variables_warnings

pytestmark = pytest.mark.usefixtures("settings_env")  # the working folder is tmp_path, with no .env of its own


def test_a_misspelt_variable_names_the_closest_real_one_and_never_its_value() -> None:
    environ = {
        "TELEGRAM_BOT_TOKEN": "123456:secret-token",
        "LLM_MODLE": "gpt-4o",
        "discord_tokn": "another-secret",  # pydantic-settings reads names whatever their case
        "BOT_WHATEVER_THIS_IS": "1",
        "LLM_MODEL": "gpt-4o",  # a real one
        "llm_api_key": "sk-real",
        "PATH": "/usr/bin",  # no settings prefix
        "LOGGING_CONFIG": "x",  # LOGGING is not LOG
        "REDIS": "{}",  # a whole group as JSON
    }
    lines = unknown_variables_warnings(environ, env_file=None)
    assert lines == [
        "TELEGRAM_BOT_TOKEN (in the environment) is not a setting: did you mean TELEGRAM_TOKEN? "
        "(a misspelt variable leaves its setting at the default)",
        "LLM_MODLE (in the environment) is not a setting: did you mean LLM_MODEL? "
        "(a misspelt variable leaves its setting at the default)",
        "discord_tokn (in the environment) is not a setting: did you mean DISCORD_TOKEN? "
        "(a misspelt variable leaves its setting at the default)",
        "BOT_WHATEVER_THIS_IS (in the environment) is not a setting: no setting reads it; the BOT_* settings are "
        "listed by bots config and in .env.example",
    ]
    assert not any(secret in "\n".join(lines) for secret in ("secret-token", "gpt-4o", "another-secret"))


def test_every_real_setting_is_known() -> None:
    assert unknown_variables_warnings({name: "1" for name in settings_variables()}, env_file=None) == []


def test_dotenv_is_read_as_the_settings_read_it(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "TELEGRAM_BOT_TOKEN=123456:from-dotenv\nLLM_MODEL=x\nLLM_TEMPRATURE=0.2\n", encoding="utf-8"
    )
    lines = unknown_variables_warnings({"TELEGRAM_BOT_TOKEN": "123456:from-environ"})  # .env in the working folder
    assert lines == [
        "TELEGRAM_BOT_TOKEN (in the environment) is not a setting: did you mean TELEGRAM_TOKEN? "
        "(a misspelt variable leaves its setting at the default)",  # once: the environment's wins
        "LLM_TEMPRATURE (in .env) is not a setting: did you mean LLM_TEMPERATURE? "
        "(a misspelt variable leaves its setting at the default)",
    ]
    assert unknown_variables_warnings({}, env_file=None) == []


def test_variables_of_other_programs_are_left_alone(tmp_path: Path) -> None:
    environ = {
        # Kubernetes' service links of deploy/k8s's redis and redis-sentinel Services
        "REDIS_SERVICE_HOST": "10.0.0.7",
        "REDIS_SERVICE_PORT": "6379",
        "REDIS_SERVICE_PORT_REDIS": "6379",
        "REDIS_PORT": "tcp://10.0.0.7:6379",
        "REDIS_PORT_6379_TCP": "tcp://10.0.0.7:6379",
        "REDIS_PORT_6379_TCP_ADDR": "10.0.0.7",
        "REDIS_SENTINEL_PORT": "tcp://10.0.0.8:26379",
        "http_proxy": "http://proxy:3128",
        "WEB_CONCURRENCY": "2",
        # read by an MCP server's settings through ${NAME}
        "MCP_SERVERS": json.dumps([{"name": "gh", "url": "http://x", "headers": {"a": "${MCP_GH_TOKEN}"}}]),
        "MCP_GH_TOKEN": "ghp-secret",
    }
    assert unknown_variables_warnings(environ, env_file=None) == []
    (line,) = unknown_variables_warnings({"REDIS_PORT": "6379"}, env_file=None)  # not a service link: warned
    assert line.startswith("REDIS_PORT (in the environment) is not a setting: did you mean REDIS_")
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"gh": {"command": "gh", "env": {"T": "${MCP_FILE_TOKEN}"}}}}))
    assert unknown_variables_warnings({"MCP_SERVERS": str(servers), "MCP_FILE_TOKEN": "t"}, env_file=None) == []
