"""The fleet's facts, in Redis: written by the workers' runs (``remember``), read and deleted by any process (a
gateway answering ``/memory``, or told by Discord that a message was deleted).

Keys (prefix ``bots:``)::

    bots:facts:conv:<cid>     hash   fact id -> the fact's JSON (``core.facts.Fact``), a conversation's facts
    bots:facts:user:<owner>   set    the conversations where a person has facts (``/memory`` across them)

Each change is one script, so a conversation's facts and the people's sets agree whatever runs at once; a fact
is written when ``remember`` runs, not with the batch's acknowledgement, and a retried batch adds nothing (the same
fact is found and returned).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from ..errors import DispatchError, MemoryStoreError
from ..facts.model import Fact
from ..facts.store import oldest_first
from .backend import RedisBackend

__all__ = ("RedisFactStore",)

_REINDEX = """
local function reindex(conv_key, cid, prefix, owners)
  local left = {}
  for _, doc in ipairs(redis.call('HVALS', conv_key)) do
    local f = cjson.decode(doc)
    if type(f.owner) == 'string' then left[f.owner] = true end
  end
  for owner, _ in pairs(owners) do
    if left[owner] then
      redis.call('SADD', prefix .. 'facts:user:' .. owner, cid)
    else
      redis.call('SREM', prefix .. 'facts:user:' .. owner, cid)
    end
  end
end
"""

ADD = (
    _REINDEX
    + """
-- KEYS: conversation hash      ARGV: id doc cid prefix limit owner('' none) scope text
-- (the people's sets are named from the owners found: one Redis, not a cluster)
for _, doc in ipairs(redis.call('HVALS', KEYS[1])) do
  local f = cjson.decode(doc)
  local owner = type(f.owner) == 'string' and f.owner or ''
  if f.text == ARGV[8] and owner == ARGV[6] and f.scope == ARGV[7] then return doc end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local owners = {}
if ARGV[6] ~= '' then owners[ARGV[6]] = true end
local all = redis.call('HVALS', KEYS[1])
local limit = tonumber(ARGV[5])
if #all > limit then
  local facts = {}
  for _, doc in ipairs(all) do facts[#facts + 1] = cjson.decode(doc) end
  table.sort(facts, function(a, b)
    if a.at ~= b.at then return a.at < b.at end
    return a.id < b.id
  end)
  for i = 1, #facts - limit do
    redis.call('HDEL', KEYS[1], facts[i].id)
    if type(facts[i].owner) == 'string' then owners[facts[i].owner] = true end
  end
end
reindex(KEYS[1], ARGV[3], ARGV[4], owners)
return ARGV[2]
"""
)

REMOVE = (
    _REINDEX
    + """
-- KEYS: conversation hash      ARGV: cid prefix mode('ids', 'message' or 'all') values...
local wanted = {}
for i = 4, #ARGV do wanted[ARGV[i]] = true end
local gone, owners = {}, {}
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  local id, doc = flat[i], flat[i + 1]
  local f = cjson.decode(doc)
  local hit = ARGV[3] == 'all' or (ARGV[3] == 'ids' and wanted[id])
    or (ARGV[3] == 'message' and type(f.message) == 'string' and wanted[f.message])
  if hit then
    redis.call('HDEL', KEYS[1], id)
    gone[#gone + 1] = doc
    if type(f.owner) == 'string' then owners[f.owner] = true end
  end
end
reindex(KEYS[1], ARGV[1], ARGV[2], owners)
return gone
"""
)


def _facts(docs: Collection[Any]) -> list[Fact]:
    return oldest_first([Fact.model_validate_json(doc) for doc in docs])


class RedisFactStore:
    """Facts shared by every process of a fleet (``core.facts.FactStore``), on the backend's connection (its
    retries while Redis restarts); a failure is a ``MemoryStoreError`` naming ``REDIS_URL``."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        """The connection, shared with the queue."""
        self.prefix = backend.config.prefix
        """Prefix of every key."""
        register = backend.client.register_script
        self._add = register(ADD)
        self._remove = register(REMOVE)

    def conversation_key(self, conversation: str) -> str:
        """The hash of a conversation's facts."""
        return f"{self.prefix}facts:conv:{conversation}"

    def owner_key(self, owner: str) -> str:
        """The set of the conversations where ``owner`` has facts."""
        return f"{self.prefix}facts:user:{owner}"

    async def _script(self, script: Any, keys: list[str], args: list[Any], *, what: str) -> Any:
        try:
            return await self.backend.call(script, keys, args, what=what)
        except DispatchError as exc:
            raise MemoryStoreError(str(exc)) from exc

    async def _read(self, work: Any, *, what: str) -> Any:
        try:
            return await self.backend.run(work, what=what)
        except DispatchError as exc:
            raise MemoryStoreError(str(exc)) from exc

    async def add(self, fact: Fact, *, limit: int) -> Fact:
        """Keep ``fact`` (see ``core.facts.FactStore.add``)."""
        doc = json.dumps(fact.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
        kept = await self._script(
            self._add,
            [self.conversation_key(fact.conversation)],
            [fact.id, doc, fact.conversation, self.prefix, limit, fact.owner or "", fact.scope.value, fact.text],
            what=f"keeping a fact of {fact.conversation}",
        )
        return Fact.model_validate_json(kept)

    async def of_conversation(self, conversation: str) -> list[Fact]:
        """The facts of a conversation, oldest first."""
        client = self.backend.client
        docs = await self._read(lambda: client.hvals(self.conversation_key(conversation)), what="reading facts")
        return _facts(docs)

    async def of_owner(self, owner: str) -> list[Fact]:
        """The facts ``owner`` owns, in every conversation, oldest first."""
        client = self.backend.client

        async def read() -> list[Any]:
            places = sorted(await client.smembers(self.owner_key(owner)))
            if not places:
                return []
            pipe = client.pipeline(transaction=False)
            for place in places:
                pipe.hvals(self.conversation_key(place))
            return [doc for docs in await pipe.execute() for doc in docs]

        return [f for f in _facts(await self._read(read, what="reading a person's facts")) if f.owner == owner]

    async def _removed(self, conversation: str, mode: str, values: Collection[str], *, what: str) -> list[Fact]:
        docs = await self._script(
            self._remove, [self.conversation_key(conversation)], [conversation, self.prefix, mode, *values], what=what
        )
        return _facts(docs or [])

    async def delete(self, conversation: str, ids: Collection[str]) -> list[Fact]:
        """Remove the facts ``ids`` of a conversation; those removed."""
        if not ids:
            return []
        return await self._removed(conversation, "ids", ids, what=f"deleting facts of {conversation}")

    async def drop_message(self, conversation: str, message: str) -> list[Fact]:
        """Remove the facts that came from ``message``; those removed."""
        return await self._removed(conversation, "message", [message], what=f"dropping facts of {conversation}")

    async def forget(self, conversation: str) -> None:
        """Remove every fact of a conversation."""
        await self._removed(conversation, "all", [], what=f"forgetting the facts of {conversation}")

    async def close(self) -> None:
        """Nothing to release: the backend is shared (its owner closes it)."""
