"""Pictures and spoken replies in a fleet (issue 41), on a real redis-server: a batch run again after its worker
died (its ledger kept, its acknowledgement never sent) neither makes nor posts the picture or the spoken reply a
second time, as its text reply is not posted twice (``core.media.post_once``, ``RedisReplyLedger.begin_named``);
the per-day picture limit is counted atomically in Redis (``RedisLimitStore``: two workers making pictures for one
user at the same moment cannot both take the last one), a batch run again counts its picture once, and the admins
(``BOT_ADMIN_USERS``) have no limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from core import ScriptedModel, create_agent
from core.definitions import ContextState
from core.errors import ActionError
from core.fleet import Drainer, RedisBackend, RedisDispatcher, RedisLimitStore, RedisMemoryStore, ReplayModel
from core.media import Outgoing, media_posters
from core.media.pictures import Pictures
from core.media.spoken import SpokenReplies
from core.models.base import ModelRequest
from core.usage import InMemoryUsage, day_of

from .conftest import queue_config
from .probe import ChatArgs, chat, probe_extension
from .server import RedisServer
from .test_drain import CID, K, Rig

PNG = b"\x89PNG\r\n\x1a\n" + b"picture" * 10
OGG = b"OggS\x00\x02" + b"speech" * 10


class Maker:
    """The images endpoint: counts the pictures it made."""

    def __init__(self) -> None:
        self.made: list[str] = []

    async def make(self, prompt: str) -> tuple[bytes, str]:
        self.made.append(prompt)
        return PNG, "image/png"


class Speaker:
    """The speech endpoint: counts what it spoke."""

    def __init__(self) -> None:
        self.spoken: list[str] = []

    async def speak(self, text: str) -> bytes:
        self.spoken.append(text)
        return OGG


class Poster:
    """The platform: records each picture and voice message posted."""

    def __init__(self) -> None:
        self.posted: list[Outgoing] = []

    async def post_media(self, state: ContextState[Any], item: Outgoing) -> str:
        self.posted.append(item)
        return f"message {len(self.posted)}"


def script(request: ModelRequest) -> str:
    if "action_result" not in request.prompt:
        return '<response><action_call name="make_picture">{"prompt": "a lighthouse at night"}</action_call></response>'
    return '<response><output type="probe:reply">here is your lighthouse</output><reasoning>done'


async def test_a_batch_run_again_posts_its_picture_and_spoken_reply_once(
    redis_server: RedisServer, gateway: Any, client: Any
) -> None:
    maker, speaker, poster, usage = Maker(), Speaker(), Poster(), InMemoryUsage()
    rig = Rig(redis_server)
    limits = RedisLimitStore(rig.backend)
    rig.agent = create_agent(
        model=ReplayModel(ScriptedModel(script)),
        extensions=[probe_extension(redis_server.url)],
        dispatcher=RedisDispatcher(rig.backend),
        memory=RedisMemoryStore(rig.backend),
        plugins=[Pictures(maker, usage=usage, per_day_user=5, limits=limits), SpokenReplies(speaker, usage=usage)],
    )
    media_posters(rig.agent).add(chat.type, poster, reply_output="probe:reply")
    rig.drainer = Drainer(rig.agent, rig.backend)
    async with rig.agent:
        await rig.agent.chat_settings.change(CID, voice="on")  # (/voice on: every answer spoken)
        ref = {"type": "probe:message", "data": "draw a lighthouse", "params": {"user_id": "7"}}
        await gateway.send(chat, ChatArgs(chat="c1"), ref)
        lease, scope, entries = await rig.batch()
        assert await rig.drainer._run(scope, entries)
        await scope.close(acknowledged=False)  # the ledger is written; then the worker dies
        assert [p.kind.value for p in poster.posted] == ["picture", "voice"]
        assert maker.made == ["a lighthouse at night"] and speaker.spoken == ["here is your lighthouse"]
        assert await client.lrange("probe:replies:c1", 0, -1) == ["here is your lighthouse"]

        await rig.expire(lease)
        assert await rig.worker.sweep_once() == 1
        assert await rig.drainer.drain({"job_id": await rig.sched()}, CID) == "released"
        assert rig.drainer.stats.redelivered == 1
        assert [p.kind.value for p in poster.posted] == ["picture", "voice"]  # nothing posted again
        assert maker.made == ["a lighthouse at night"] and speaker.spoken == ["here is your lighthouse"]
        assert await client.lrange("probe:replies:c1", 0, -1) == ["here is your lighthouse"]
        assert (await usage.totals("pictures:user:probe:7", [day_of()])).output_tokens == 1
        counted = [k for k in await client.keys("bots:limits:msgs:pictures:probe:7:*")]
        assert len(counted) == 1 and await client.zcard(counted[0]) == 1  # the day's count: one picture
        assert not await client.exists(K + "ledger:1")  # the ack dropped the ledger with the batch
    await rig.backend.close()


async def test_the_daily_picture_limit_is_atomic_across_workers_and_admins_have_none(
    redis_server: RedisServer, client: Any
) -> None:
    backends = [RedisBackend(queue_config(redis_server)) for _ in range(2)]  # two workers' connections
    try:
        workers = [
            Pictures(Maker(), per_day_user=3, limits=RedisLimitStore(b), admins=frozenset({"telegram:1"}))
            for b in backends
        ]

        async def one(i: int, user: str) -> bool:
            try:
                await workers[i % 2]._admit(user, f"batch-{user}-{i}")
            except ActionError as exc:
                assert "IMAGES_PER_DAY_USER" in str(exc)
                return False
            return True

        admitted = await asyncio.gather(*(one(i, "telegram:2") for i in range(12)))
        assert sum(admitted) == 3  # exactly the limit, whichever worker asked
        assert all(await asyncio.gather(*(one(i, "telegram:1") for i in range(12))))  # an admin: no limit
        assert await workers[0]._admit("telegram:3", "batch-x") is None
        assert await workers[1]._admit("telegram:3", "batch-x") is None  # the same picture, counted once
        [key] = await client.keys("bots:limits:msgs:pictures:telegram:3:*")
        assert await client.zcard(key) == 1
        assert 0 < await client.pttl(key) <= 2 * 86_400_000
        with pytest.raises(ActionError):
            await workers[0]._admit("telegram:2", "batch-late")
    finally:
        for b in backends:
            await b.close()
