"""What ``bots config`` asks the servers the settings name, beyond "does it answer" (``bots.config``):

- Redis (``redis_safety``): an acknowledged message must survive a restart and never be evicted, and Redis must
  refuse writes rather than be killed when it runs out of memory: persistence on (``appendonly yes``), the
  eviction policy ``noeviction``, ``maxmemory`` set (below the container's memory limit). Each is a warning
  naming the Redis setting to change;
- PostgreSQL (``postgres_report``, ``DATABASE_URL``): it answers, with the history's schema version; a server that
  does not answer (a closed port, a refused password) is a problem.

Only names, addresses and versions are shown: passwords are masked (``safe_url``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from .settings import Settings

__all__ = ("postgres_report", "redis_safety")


async def redis_safety(client: Any, where: str) -> list[str]:
    """Warnings about the Redis server ``client`` talks to (at ``where``, its URL masked): persistence, eviction,
    ``maxmemory``. Read with ``CONFIG GET``, or from ``INFO`` where ``CONFIG`` is disabled (a managed Redis)."""
    import redis.exceptions

    try:
        config: dict[str, str] = {}
        for pattern in ("appendonly", "save", "maxmemory", "maxmemory-policy"):
            config.update(await client.config_get(pattern))
    except redis.exceptions.ResponseError:  # CONFIG renamed or refused: INFO says most of it
        persistence = await client.info("persistence")
        memory = await client.info("memory")
        config = {
            "appendonly": "yes" if int(persistence.get("aof_enabled", 0)) else "no",
            "maxmemory": str(memory.get("maxmemory", "0")),
            "maxmemory-policy": str(memory.get("maxmemory_policy", "?")),
        }
    warnings = []
    save = config.get("save")
    if config.get("appendonly") != "yes":
        if save == "":
            warnings.append(
                f'Redis at {where} keeps nothing on disk (appendonly no, save ""): every message waiting or '
                "running is lost when it restarts; set appendonly yes (redis.conf, or CONFIG SET appendonly yes "
                "and CONFIG REWRITE)"
            )
        else:
            shown = f'save "{save}"' if save is not None else "snapshots only"
            warnings.append(
                f"Redis at {where} has appendonly no ({shown}): the messages acknowledged since its last snapshot "
                "are lost when it restarts; set appendonly yes"
            )
    policy = config.get("maxmemory-policy", "?")
    if policy != "noeviction":
        warnings.append(
            f"Redis at {where} has maxmemory-policy {policy}: under memory pressure it evicts keys, and an evicted "
            "inbox, lease or batch is a lost message; set maxmemory-policy noeviction"
        )
    if config.get("maxmemory", "0") in ("0", ""):
        warnings.append(
            f"Redis at {where} has no maxmemory: past its container's memory limit it is killed instead of "
            "refusing writes (the gateways then hold messages and retry); set maxmemory to about 80% of that limit"
        )
    return warnings


async def postgres_report(settings: Settings, *, where: str, timeout: float = 3.0) -> tuple[list[str], list[str]]:
    """``(lines, problems)`` about ``DATABASE_URL`` (shown as ``where``, its password masked): the server's version
    and the history's schema version, or one problem saying what to fix. Nothing when ``DATABASE_URL`` is unset."""
    url = settings.database.url.get_secret_value().strip() if settings.database.url is not None else ""
    if not url:
        return [], []
    try:
        import psycopg
    except ImportError:
        return [], ["DATABASE_URL is set but psycopg is not installed: install the postgres extra"]
    try:
        async with asyncio.timeout(timeout + 0.5):
            connection = await psycopg.AsyncConnection.connect(url, connect_timeout=max(1, int(timeout)))
            async with connection:
                cursor = await connection.execute("SHOW server_version")
                version = (await cursor.fetchone() or ("?",))[0]
                schema = await _schema_version(connection)
    except TimeoutError:
        return [], [f"PostgreSQL at DATABASE_URL={where} does not answer in {timeout:g}s: start it or fix DATABASE_URL"]
    except (psycopg.Error, OSError, ValueError) as exc:
        reason = str(exc).strip().split("\n")[0][:160].replace(url, where)
        if "password" in reason.lower():
            fix = "fix the user or password in DATABASE_URL"
        else:
            fix = "start PostgreSQL there or fix DATABASE_URL"
        return [], [f"PostgreSQL at DATABASE_URL={where} cannot be reached ({reason}): {fix}"]
    shown = f"history schema version {schema}" if schema is not None else "no history tables yet (made at first start)"
    return [f"{where}: PostgreSQL {version}, {shown}"], []


async def _schema_version(connection: Any) -> int | None:
    """The version the history's migrations reached (``core.memory.postgres``), or None before the first start."""
    import psycopg

    try:
        cursor = await connection.execute("SELECT max(version) FROM bot_schema")
        row = await cursor.fetchone()
    except psycopg.Error:
        await connection.rollback()
        return None
    return int(row[0]) if row and row[0] is not None else None
