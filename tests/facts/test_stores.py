"""The fact stores keep the same promises: the store of one process (in its memory store) and the fleet's (a real
redis-server): a fact kept twice is kept once, a conversation keeps its newest, a person's facts are found in every
conversation and only theirs, and deleting (by id, by the message they came from, a whole conversation) keeps the
person's list right."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from core.facts import Fact, FactScope, FactStore, MemoryFactStore
from core.memory import InMemoryStore

ALICE, BOB = "telegram:1", "telegram:2"
GROUP, DM = "telegram:chat:-100", "telegram:chat:1"


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[FactStore]:
    if request.param == "memory":
        yield MemoryFactStore(InMemoryStore())
        return
    from core.fleet import QueueConfig, RedisBackend, RedisFactStore

    server: Any = request.getfixturevalue("redis_server")
    backend = RedisBackend(QueueConfig(url=server.url, retry_seconds=5.0))
    try:
        yield RedisFactStore(backend)
    finally:
        await backend.close()


def fact(text: str, *, owner: str | None = ALICE, where: str = GROUP, at: int = 1, message: str | None = None) -> Fact:
    return Fact(conversation=where, text=text, owner=owner, at=at, message=message)


async def test_a_fact_kept_twice_is_kept_once(store: FactStore) -> None:
    first = await store.add(fact("locker 4711"), limit=10)
    again = await store.add(fact("locker 4711", at=2), limit=10)  # a retried run
    assert again == first
    said = Fact(conversation=GROUP, text="locker 4711", owner=ALICE, scope=FactScope.GROUP, at=3)
    shared = await store.add(said, limit=10)
    bobs = await store.add(fact("locker 4711", owner=BOB, at=4), limit=10)
    assert [f.id for f in await store.of_conversation(GROUP)] == [first.id, shared.id, bobs.id]


async def test_a_conversation_keeps_its_newest(store: FactStore) -> None:
    for n in range(5):
        await store.add(fact(f"fact {n}", owner=ALICE if n < 2 else BOB, at=n), limit=3)
    assert [f.text for f in await store.of_conversation(GROUP)] == ["fact 2", "fact 3", "fact 4"]
    assert await store.of_owner(ALICE) == []  # her two went: she has nothing left anywhere
    assert [f.text for f in await store.of_owner(BOB)] == ["fact 2", "fact 3", "fact 4"]


async def test_a_person_s_facts_are_theirs_in_every_conversation(store: FactStore) -> None:
    await store.add(fact("in the group", at=1), limit=10)
    await store.add(fact("bob's", owner=BOB, at=2), limit=10)
    await store.add(fact("nobody's", owner=None, at=3), limit=10)
    await store.add(fact("in private", where=DM, at=4), limit=10)
    assert [(f.conversation, f.text) for f in await store.of_owner(ALICE)] == [
        (GROUP, "in the group"),
        (DM, "in private"),
    ]
    assert [f.text for f in await store.of_owner(BOB)] == ["bob's"]
    assert await store.of_owner("telegram:3") == []


async def test_deleting_by_id_by_message_and_by_conversation(store: FactStore) -> None:
    one = await store.add(fact("one", at=1, message="11"), limit=10)
    two = await store.add(fact("two", at=2, message="12"), limit=10)
    bobs = await store.add(fact("bob's", owner=BOB, at=3, message="12"), limit=10)
    elsewhere = await store.add(fact("elsewhere", where=DM, at=4, message="11"), limit=10)
    assert await store.delete(GROUP, [one.id, "no-such-id"]) == [one]
    assert await store.delete(GROUP, []) == []
    assert await store.drop_message(GROUP, "12") == [two, bobs]  # that conversation's message 12 only
    assert await store.drop_message(GROUP, "99") == []
    assert await store.of_conversation(GROUP) == []
    assert await store.of_owner(ALICE) == [elsewhere] and await store.of_owner(BOB) == []
    await store.add(fact("again", at=5), limit=10)
    await store.forget(GROUP)
    assert await store.of_conversation(GROUP) == [] and await store.of_owner(ALICE) == [elsewhere]
    await store.forget(DM)
    assert await store.of_owner(ALICE) == []


async def test_text_is_kept_as_written(store: FactStore) -> None:
    text = 'Ada\'s "code" is <4711> & ünïcödé 🎉 -- {"x": 1}'
    kept = await store.add(fact(text), limit=10)
    assert (await store.of_conversation(GROUP))[0].text == text == kept.text
    assert await store.add(fact(text, at=9), limit=10) == kept


async def test_the_store_of_one_process_reads_a_conversation_s_facts_once_and_keeps_its_changes() -> None:
    """``MemoryFactStore`` keeps the facts it read or wrote (issue 51: no SQLite round trip before each answer):
    what it returns after any change is what a fresh store reads from the same memory."""

    class Counting(InMemoryStore):
        reads = 0

        async def get(self, key: str) -> Any:
            if key.startswith("facts:"):
                Counting.reads += 1
            return await super().get(key)

    memory = Counting()
    store = MemoryFactStore(memory)
    alice = Fact(conversation="chat:1", owner="telegram:1", text="Alice likes tea")
    await store.add(alice, limit=10)
    reads = Counting.reads
    for _ in range(3):
        assert [f.text for f in await store.of_conversation("chat:1")] == ["Alice likes tea"]
    assert Counting.reads == reads  # kept since it wrote them
    bob = await store.add(Fact(conversation="chat:1", owner="telegram:2", text="Bob likes coffee"), limit=10)
    await store.delete("chat:1", [alice.id])
    fresh = MemoryFactStore(memory)
    assert await store.of_conversation("chat:1") == await fresh.of_conversation("chat:1") == [bob]
    await store.forget("chat:1")
    assert await store.of_conversation("chat:1") == await MemoryFactStore(memory).of_conversation("chat:1") == []
