"""SQLite files have schema versions, as PostgreSQL's history has: each component's steps are applied in order when
the file is opened, a file made before versions (``PRAGMA user_version`` 0) is taken up as it is, a file a newer
version migrated further is refused, a failed step changes nothing; and the files are the bot's user's alone."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from core.errors import MemoryStoreError
from core.memory import HistoryEntry
from core.memory.sqlite import SQLITE_LAYOUT, SQLiteStore
from core.memory.sqlite_history import SCHEMA, SQLiteHistory
from core.usage import SQLiteUsage


class NextStore(SQLiteStore):
    """The memory store of a later version: two more steps."""

    migrations = (
        "ALTER TABLE kv ADD COLUMN note TEXT; CREATE TABLE steps (n INTEGER);  INSERT INTO steps VALUES (2);",
        "UPDATE kv SET note = 'from step 3'; INSERT INTO steps VALUES (3);",
    )


def version_zero_file(path: Path) -> None:
    """``memory.sqlite3`` as the versions before schema versions left it: the memory store's and the history's
    tables with rows, ``user_version`` 0, no ``bot_schema``."""
    conn = sqlite3.connect(path)
    conn.executescript(SQLiteStore.schema + ";" + SCHEMA)
    conn.execute("INSERT INTO kv (key, value) VALUES ('context:cli:ann', '{\"name\": \"Ann\"}')")
    conn.execute(
        "INSERT INTO history (cid, id, ts, role, who, text) VALUES ('cli:ann', 'm1', 1000, 'user', 'Ann', 'the harbour')"
    )
    conn.commit()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    conn.close()


def versions(path: Path) -> tuple[int, dict[str, int]]:
    conn = sqlite3.connect(path)
    try:
        layout = conn.execute("PRAGMA user_version").fetchone()[0]
        rows = dict(conn.execute("SELECT component, version FROM bot_schema").fetchall())
    finally:
        conn.close()
    return layout, rows


async def test_a_version_zero_file_is_taken_up_then_migrated_in_order(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    version_zero_file(path)
    store, history = SQLiteStore(path), SQLiteHistory(path)
    assert await store.get("context:cli:ann") == {"name": "Ann"}
    assert await history.count("cli:ann") == 1
    await history.append("cli:ann", [HistoryEntry(id="m2", ts=2000, role="assistant", who="bot", text="at nine")])
    assert [e.text for e in await history.search("cli:ann", words="harbour")] == [
        "the harbour"
    ]  # the index still works
    await store.close()
    await history.close()
    assert versions(path) == (SQLITE_LAYOUT, {"memory": 1, "history": 1})

    later = NextStore(path)
    assert await later.get("context:cli:ann") == {"name": "Ann"}
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT n FROM steps").fetchall() == [(2,), (3,)]
    assert conn.execute("SELECT note FROM kv").fetchall() == [("from step 3",)]
    conn.close()
    await later.close()
    assert versions(path) == (SQLITE_LAYOUT, {"memory": 3, "history": 1})

    older = SQLiteStore(path)  # a downgrade: the file is ahead of this version
    with pytest.raises(
        MemoryStoreError, match=r"newer version of the bot .*memory is at version 3, this version knows 1"
    ):
        await older.get("context:cli:ann")
    await older.close()


async def test_a_step_that_fails_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    version_zero_file(path)

    class Broken(SQLiteStore):
        migrations = ("ALTER TABLE kv ADD COLUMN note TEXT; SELECT * FROM no_such_table;",)

    broken = Broken(path)
    with pytest.raises(MemoryStoreError, match="no such table"):
        await broken.get("context:cli:ann")
    await broken.close()
    conn = sqlite3.connect(path)
    assert [row[1] for row in conn.execute("PRAGMA table_info(kv)")] == ["key", "value"]  # the ALTER rolled back
    conn.close()
    assert versions(path)[1] == {"memory": 1}


async def test_the_files_and_their_folder_are_the_bot_users_alone(tmp_path: Path) -> None:
    old_mask = os.umask(0o022)
    try:
        data = tmp_path / "data"
        store, usage = SQLiteStore(data / "memory.sqlite3"), SQLiteUsage(data / "usage.sqlite3")
        await store.set("k", "v")
        await usage.add(day="2026-01-01", keys=["model:x"], input_tokens=1, output_tokens=1, cost=0)
        await usage.totals("model:x", ["2026-01-01"])  # (what waits in memory is written before a read)
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        made = sorted(p.name for p in data.iterdir())
        assert {"memory.sqlite3", "memory.sqlite3-wal", "memory.sqlite3-shm", "usage.sqlite3"} <= set(made)
        for name in made:
            assert stat.S_IMODE((data / name).stat().st_mode) == 0o600, name
        await store.close()
        await usage.close()

        shared = tmp_path / "shared"
        shared.mkdir(mode=0o755)
        legacy = shared / "memory.sqlite3"
        version_zero_file(legacy)
        legacy.chmod(0o644)  # made world-readable by an older version
        reopened = SQLiteStore(legacy)
        assert await reopened.get("context:cli:ann") == {"name": "Ann"}
        await reopened.close()
        assert stat.S_IMODE(legacy.stat().st_mode) == 0o600
    finally:
        os.umask(old_mask)
