"""docs/how-to/backup.md as a test: its shell blocks, run as written with bash, back up and restore the bot's SQLite
files (written by the bot's own stores), a PostgreSQL history (the test's own server, tests/postgres_server.py) and
a redis-server with a password (its snapshot and append-only files, then restarted from them), after the data was
lost or overwritten."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

from core.memory import HistoryEntry
from core.memory.postgres import PostgresHistory
from core.memory.sqlite import SQLiteStore
from core.memory.sqlite_history import SQLiteHistory
from tests.fleet.server import RedisServer

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "backup.md"
_BLOCK = re.compile(r"^<!-- backup: (?P<name>[\w-]+) -->\n```sh\n(?P<code>.*?)^```$", re.S | re.M)
PASSWORD = "redis-password-for-the-backup-test"


def block(name: str) -> str:
    found = {m["name"]: m["code"] for m in _BLOCK.finditer(GUIDE.read_text(encoding="utf-8"))}
    return found[name]


def run(name: str, **variables: str) -> str:
    """Run the guide's block ``name`` with bash (stopping at the first failing command) and ``variables``."""
    env = {**os.environ, **variables}
    done = subprocess.run(["bash", "-e", "-c", block(name)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, f"{name}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_guide_has_every_block_the_test_runs() -> None:
    names = [m["name"] for m in _BLOCK.finditer(GUIDE.read_text(encoding="utf-8"))]
    assert names == [
        "sqlite-backup",
        "sqlite-restore",
        "postgres-backup",
        "postgres-restore",
        "redis-backup",
        "redis-restore",
    ]


def entry(n: int, text: str) -> HistoryEntry:
    return HistoryEntry(id=f"m{n}", ts=1000 * n, role="user", who="Ann", text=text)


async def test_sqlite_backup_while_the_bot_writes_then_restore(tmp_path: Path) -> None:
    data, backup = tmp_path / "data", tmp_path / "backup"
    store, history = SQLiteStore(data / "memory.sqlite3"), SQLiteHistory(data / "memory.sqlite3")
    await store.set("context:telegram:chat:1", {"name": "Ann", "plants": 3})
    await history.append("telegram:chat:1", [entry(1, "water the plants"), entry(2, "and the roses")])
    (data / "web_secret").write_text("k" * 64 + "\n")
    (data / "web_secret").chmod(0o600)
    run("sqlite-backup", DATA=str(data), BACKUP=str(backup))  # the bot still has the files open
    assert stat.S_IMODE(backup.stat().st_mode) == 0o700

    await store.set("context:telegram:chat:1", {"name": "overwritten"})  # what the restore must undo
    await history.forget("telegram:chat:1")
    await store.close()
    await history.close()
    (data / "web_secret").unlink()

    run("sqlite-restore", DATA=str(data), BACKUP=str(backup))
    store, history = SQLiteStore(data / "memory.sqlite3"), SQLiteHistory(data / "memory.sqlite3")
    assert await store.get("context:telegram:chat:1") == {"name": "Ann", "plants": 3}
    assert [e.text for e in await history.search("telegram:chat:1", words="roses")] == ["and the roses"]
    await store.close()
    await history.close()
    assert (data / "web_secret").read_text().strip() == "k" * 64
    for name in ("memory.sqlite3", "web_secret"):
        assert stat.S_IMODE((data / name).stat().st_mode) == 0o600, name


async def test_postgresql_backup_then_restore_into_a_new_database(tmp_path: Path, postgres_server: Any) -> None:
    first = postgres_server.create_database()
    history = PostgresHistory(first)
    await history.start()
    await history.append("telegram:chat:7", [entry(1, "the lighthouse"), entry(2, "opens at nine")])
    await history.close()
    run("postgres-backup", DATABASE_URL=first, BACKUP=str(tmp_path / "backup"))

    fresh = postgres_server.create_database()  # the old server is gone: an empty database
    run("postgres-restore", DATABASE_URL=fresh, BACKUP=str(tmp_path / "backup"))
    restored = PostgresHistory(fresh)
    await restored.start()  # the schema version came with the data: nothing to migrate
    assert await restored.count("telegram:chat:7") == 2
    assert [e.text for e in await restored.search("telegram:chat:7", words="lighthouse")] == ["the lighthouse"]
    await restored.close()


async def test_redis_backup_then_restart_from_it(tmp_path: Path, redis_server: RedisServer) -> None:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
    await client.config_set("requirepass", PASSWORD)
    await client.aclose()
    client = redis.asyncio.Redis.from_url(redis_server.url, password=PASSWORD, decode_responses=True)
    try:
        await client.rpush("bots:{telegram:chat:1}:inbox", '{"v":1,"c":"telegram:chat","i":{"data":"hello"}}')
        await client.set("bots:{telegram:chat:1}:mem:context", '{"name":"Ann"}')
        await client.zadd("bots:active", {"telegram:chat:1": 1})
        variables = {
            "REDIS_HOST": "127.0.0.1",
            "REDIS_PORT": str(redis_server.port),
            "REDIS_PASSWORD": PASSWORD,
            "REDIS_DIR": str(redis_server.folder),
            "BACKUP": str(tmp_path / "backup"),
        }
        run("redis-backup", **variables)
        await client.set("bots:{telegram:chat:1}:mem:context", '{"name":"after the backup"}')
    finally:
        await client.aclose()

    redis_server.stop()
    for item in redis_server.folder.iterdir():  # the disk is lost
        if item.is_dir():
            shutil.rmtree(item)
        elif item.name != "redis.log":
            item.unlink()
    run("redis-restore", **variables)
    redis_server.start()  # (the password is set on the command line of a real deployment; not here)
    client = redis.asyncio.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        assert await client.lrange("bots:{telegram:chat:1}:inbox", 0, -1) == [
            '{"v":1,"c":"telegram:chat","i":{"data":"hello"}}'
        ]
        assert await client.get("bots:{telegram:chat:1}:mem:context") == '{"name":"Ann"}'
        assert await client.zscore("bots:active", "telegram:chat:1") == 1.0
        assert (await client.info("persistence"))["aof_enabled"] == 1
    finally:
        await client.aclose()
