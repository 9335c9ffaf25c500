"""The history stores (SQLite with FTS5, PostgreSQL with a GIN index) behave the same."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.errors import MemoryStoreError
from core.memory import HistoryEntry, HistoryStore, SQLiteHistory, Summary
from core.memory.history import excerpt, message_prefix, query_words

DAY = 86_400_000
T0 = 1_700_000_000_000


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[HistoryStore]:
    if request.param == "sqlite":
        history: HistoryStore = SQLiteHistory(tmp_path / "h.sqlite3")
    else:
        from core.memory.postgres import PostgresHistory

        history = PostgresHistory(request.getfixturevalue("database_url"))
    try:
        yield history
    finally:
        await history.close()


def said(n: int, text: str, *, who: str = "ada", ts: int | None = None) -> HistoryEntry:
    return HistoryEntry(id=f"m{n}", ts=T0 + n * 1000 if ts is None else ts, role="user", who=who, text=text)


async def test_append_is_idempotent_and_search_finds_words_newest_first(store: HistoryStore) -> None:
    await store.append("c:1", [said(1, "My cat is called Zorblax"), said(2, "I like green tea"), said(3, "cats rule")])
    await store.append("c:1", [said(4, "the CAT again")])
    await store.append("c:1", [said(1, "My cat is called Zorblax")])  # a redelivered batch
    await store.append("c:2", [said(1, "another chat's cat")])
    assert await store.count("c:1") == 4
    found = await store.search("c:1", words="cat")
    assert [e.id for e in found] == ["m4", "m1"]  # whole words in any case, newest first: not "cats", not c:2
    assert [e.id for e in await store.search("c:1", words="cats")] == ["m3"]
    assert [e.text for e in await store.search("c:1", words="CAT zorblax")] == ["My cat is called Zorblax"]
    assert await store.search("c:1", words="dog") == []
    assert [e.id for e in await store.search("c:1", limit=2)] == ["m4", "m3"]
    first = (await store.search("c:1", words="tea"))[0]
    assert (first.who, first.role, first.ts) == ("ada", "user", T0 + 2000) and first.seq > 0


async def test_search_by_date_range(store: HistoryStore) -> None:
    await store.append("c:1", [said(n, f"day {n} lunch", ts=T0 + n * DAY) for n in range(10)])
    found = await store.search("c:1", words="lunch", since=T0 + 3 * DAY, until=T0 + 5 * DAY, limit=10)
    assert [e.id for e in found] == ["m5", "m4", "m3"]
    assert [e.id for e in await store.search("c:1", until=T0 + DAY, limit=10)] == ["m1", "m0"]


async def test_query_syntax_is_never_an_error(store: HistoryStore) -> None:
    await store.append("c:1", [said(1, 'quote " and (parens) AND OR NOT * : & |')])
    for words in ['"', "(", "AND", "a:b", "x & y | !z", "*", "'; DROP TABLE history; --", "NEAR(a b)"]:
        await store.search("c:1", words=words)  # no MemoryStoreError
    assert len(await store.search("c:1", words="parens quote")) == 1


async def test_pending_leaves_the_newest_entries_alone(store: HistoryStore) -> None:
    await store.append("c:1", [said(n, f"message {n}") for n in range(1, 11)])
    assert await store.pending("c:1", after=0, keep=6, limit=5) == []  # only 4 would leave the window
    batch = await store.pending("c:1", after=0, keep=5, limit=5)
    assert [e.id for e in batch] == ["m1", "m2", "m3", "m4", "m5"]
    assert await store.pending("c:1", after=batch[-1].seq, keep=1, limit=5) == []


async def test_summary_is_replaced_only_from_the_summary_it_read(store: HistoryStore) -> None:
    await store.append("c:1", [said(n, f"message {n}") for n in range(1, 5)])
    entries = await store.search("c:1", limit=10)
    newest = entries[0].seq
    assert await store.summary("c:1") == Summary()
    assert await store.set_summary("c:1", Summary(text="first", upto=entries[2].seq), expected=0)
    assert not await store.set_summary("c:1", Summary(text="stale", upto=newest), expected=0)
    assert await store.set_summary("c:1", Summary(text="second", upto=newest), expected=entries[2].seq)
    got = await store.summary("c:1")
    assert (got.text, got.upto) == ("second", newest) and got.updated > 0
    await store.forget("c:1")
    assert await store.count("c:1") == 0 and await store.summary("c:1") == Summary()
    assert not await store.set_summary("c:1", Summary(text="raced", upto=newest), expected=0)  # gone: not written


async def test_prune_removes_old_entries_of_every_conversation(store: HistoryStore) -> None:
    await store.append("c:1", [said(n, f"old {n}", ts=T0 + n) for n in range(7)])
    await store.append("c:2", [said(1, "old too", ts=T0), said(2, "recent", ts=T0 + 10 * DAY)])
    assert await store.prune(before=T0 + DAY) == 8
    assert await store.count("c:1") == 0
    assert [e.text for e in await store.search("c:2", words="old")] == []
    assert [e.text for e in await store.search("c:2")] == ["recent"]


async def test_unreachable_postgres_names_database_url() -> None:
    from core.memory.postgres import PostgresHistory

    history = PostgresHistory("postgresql://bot:secret@127.0.0.1:1/nothing", timeout=2)
    with pytest.raises(MemoryStoreError, match="DATABASE_URL") as info:
        await history.search("c:1", words="x")
    assert "secret" not in str(info.value)
    await history.close()


def test_words_and_excerpts() -> None:
    assert query_words("Hello, wörld! a:b") == ["hello", "wörld", "a", "b"]
    text = "x" * 300 + " the secret word " + "y" * 300
    cut = excerpt(text, ["secret"], width=100)
    assert "secret" in cut and len(cut) <= 102 and cut.startswith("…") and cut.endswith("…")
    assert excerpt("short  text", []) == "short text"


async def test_workers_starting_together_migrate_once(database_url: str) -> None:
    import asyncio

    import psycopg

    from core.memory.postgres import MIGRATIONS, PostgresHistory

    stores = [PostgresHistory(database_url) for _ in range(3)]
    try:
        await asyncio.gather(*(s.start() for s in stores))
        await stores[0].append("c:1", [said(1, "hello")])
        assert [e.text for e in await stores[2].search("c:1", words="hello")] == ["hello"]
    finally:
        for s in stores:
            await s.close()
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        rows = await (await conn.execute("SELECT version FROM bot_schema ORDER BY version")).fetchall()
    assert [r[0] for r in rows] == list(range(1, len(MIGRATIONS) + 1))


async def test_delete_removes_the_entries_named_in_that_conversation_only(store: HistoryStore) -> None:
    """A message its author deleted (``core.deleted``) leaves the history, and its words the search."""
    await store.append("c:1", [said(1, "my locker code is 4711"), said(2, "the party is on Friday")])
    await store.append("c:2", [said(1, "another chat's 4711")])
    assert await store.delete("c:1", ["m1", "unknown"]) == 1
    assert [e.id for e in await store.search("c:1")] == ["m2"]
    assert await store.search("c:1", words="4711") == []
    assert await store.count("c:2") == 1
    assert await store.delete("c:1", []) == 0


async def test_delete_finds_a_platform_messages_entries_by_its_message_id(store: HistoryStore) -> None:
    """However old: an input's history id starts with its platform message id (``recording.history_id``)."""
    kept = HistoryEntry(id=f"{message_prefix('77')}in-1", ts=1, role="user", who="ann", text="my locker code is 4711")
    similar = HistoryEntry(id=f"{message_prefix('777')}in-2", ts=2, role="user", who="bob", text="hello")
    await store.append("c:1", [kept, similar])
    await store.append("c:2", [HistoryEntry(id=f"{message_prefix('77')}in-3", ts=1, role="user", who="x", text="y")])
    assert await store.delete("c:1", [], messages=["77"]) == 1
    assert [e.id for e in await store.search("c:1")] == [similar.id]  # 777 is another message
    assert await store.count("c:2") == 1
