"""A data file that cannot be used stops ``bots run`` at start (issue 47, operators): one line naming the file and
the fix, exit code 2 (which the systemd units do not restart), no traceback and no answering loop that fails on
every message while ``/readyz`` says ready. The program runs as a process, as an operator starts it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from core.memory import SQLiteHistory, SQLiteStore
from tests.bots_fleet import env_for


def data_of(tmp_path: Path) -> Path:
    """A data folder as a first start leaves it (the memory store and the history in memory.sqlite3)."""
    data = tmp_path / "data"

    async def make() -> None:
        for store in (SQLiteStore(data / "memory.sqlite3"), SQLiteHistory(data / "memory.sqlite3")):
            await store.check()
            await store.close()

    asyncio.run(make())
    return data


def start(tmp_path: Path, data: Path, *, wrap: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*wrap, sys.executable, "-m", "bots.cli", "run"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env_for(tmp_path, BOT_DATA_DIR=str(data), HOME=str(tmp_path)),
        timeout=60,
    )


def refused(done: subprocess.CompletedProcess[str], path: Path, fix: str) -> None:
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("bots: ")]
    assert len(said) == 1 and str(path) in said[0] and fix in said[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not any(" ready " in line or '"ready with' in line for line in done.stderr.splitlines())


def test_a_data_file_written_by_a_newer_version_stops_bots_run_at_start(tmp_path: Path) -> None:
    data = data_of(tmp_path)
    with contextlib.closing(sqlite3.connect(data / "memory.sqlite3")) as conn:  # as after a rollback
        conn.execute("UPDATE bot_schema SET version = 99 WHERE component = 'history'")
        conn.commit()
    refused(start(tmp_path, data), data / "memory.sqlite3", "run that version, or restore the backup")


def test_a_data_file_of_a_feature_written_by_a_newer_version_stops_bots_run_at_start(tmp_path: Path) -> None:
    data = data_of(tmp_path)
    visitors = data / "web_visitors.sqlite3"  # a file only a feature opens, later (the web chat's first visitor)
    with contextlib.closing(sqlite3.connect(visitors)) as conn:
        conn.execute("PRAGMA user_version = 7")
    refused(start(tmp_path, data), visitors, "run that version, or restore the backup")


def test_a_corrupt_data_file_stops_bots_run_at_start(tmp_path: Path) -> None:
    data = data_of(tmp_path)
    (data / "memory.sqlite3").write_bytes(b"this is not what the bot wrote " * 200)
    refused(start(tmp_path, data), data / "memory.sqlite3", "restore it from a backup")


NO_OVERRIDE = "-dac_override,-dac_read_search"


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to take the bypass away"
)
def test_a_data_file_without_permission_stops_bots_run_at_start(tmp_path: Path) -> None:
    data = data_of(tmp_path)
    os.chown(data / "memory.sqlite3", 65534, 65534)  # another user's file (restored by hand, say)
    # the bot runs as root without root's bypass of file permissions, as the bot's own user would run
    wrap = ["setpriv", f"--bounding-set={NO_OVERRIDE}", f"--inh-caps={NO_OVERRIDE}"]
    refused(start(tmp_path, data, wrap=wrap), data / "memory.sqlite3", "read and write access")


@contextlib.contextmanager
def full_disk(where: Path) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_stops_bots_run_at_start(tmp_path: Path) -> None:
    made = data_of(tmp_path)
    with full_disk(tmp_path / "disk") as disk:
        data = disk / "data"
        data.mkdir(mode=0o700)
        (data / "memory.sqlite3").write_bytes((made / "memory.sqlite3").read_bytes())
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        refused(start(tmp_path, data), data / "memory.sqlite3", "the disk is full")
