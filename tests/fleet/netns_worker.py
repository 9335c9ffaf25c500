"""The queue worker of the network-fault tests (``python -m tests.fleet.netns_worker``), run inside a host of
``tests.fleet.netns``: the Telegram extension against the fake Bot API on its host, and a model that is a
service on another host (the fake's ``POST /echo`` streams ``echo: <the messages of the batch>`` back), so a
link to the model is one more link of the network.

With ``--schedules`` it also fires the fleet's schedules as ``bots worker`` does (``RedisScheduleStore``, the
primary's clock through ``ServerClock``, a claim lease of at least 5 s); with ``--set-schedules FILE`` it only
stores the schedules ``FILE`` lists (a JSON list of ``{"chat": <chat id>, "at": <epoch seconds>, "every":
<seconds> or null, "text": ...}``) and exits."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from core.testing import updates_of

from .worker_process import run, serve, worker_arguments

_INPUT = re.compile(r"<input [^>]*>(.*?)</input>", re.S)


class RemoteEcho:
    """A model whose answers come from ``<url>/echo`` (the model fake's host), streamed as they come."""

    name = "remote-echo"
    model = ""
    vision = False
    last_usage = None

    def __init__(self, url: str) -> None:
        self.url = url
        self._session: aiohttp.ClientSession | None = None

    async def stream(self, request: Any) -> AsyncIterator[str]:
        found = updates_of(request.prompt)
        text = " | ".join(_INPUT.findall(found) if found else [])
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        yield '<response><output type="telegram:message">'
        async with self._session.post(f"{self.url}/echo", data=text.encode()) as answer:
            answer.raise_for_status()
            async for chunk in answer.content.iter_any():
                yield chunk.decode()
        yield "</output></response>"


async def _work(args: argparse.Namespace) -> None:
    from core import Agent
    from core.fleet import QueueConfig, RedisBackend, RedisScheduleStore, ServerClock
    from core.schedules import Schedules
    from extensions.chat import Uncertain
    from extensions.telegram import TelegramSettings, telegram_extension

    sentinels = tuple((h, int(p)) for h, p in (s.split(":") for s in args.sentinels.split(",") if s))
    config = QueueConfig(
        url=args.url,
        sentinels=sentinels,
        sentinel_master="bots",
        min_replicas=args.min_replicas,
        lease_seconds=args.lease,
        retry_seconds=30.0,
        max_attempts=20,
    )
    settings = TelegramSettings(
        token=args.token,
        api_url=args.api_url,
        stream_replies=True,
        stream_interval=0.05,
        rate_limit=0,
        uncertain_replies=Uncertain.RESEND,
    )
    model = RemoteEcho(args.model_url)
    backend = RedisBackend(config)
    store = RedisScheduleStore(backend)
    if args.set_schedules:
        await _set_schedules(Path(args.set_schedules), store, settings, model)
        await backend.close()
        return

    def attach(agent: Agent) -> None:
        if args.schedules:  # as bots worker: the primary's clock, a claim lease of REDIS_LEASE_SECONDS, 5 s at least
            Schedules.attach(agent, store, clock=ServerClock(backend), lease=max(5.0, args.lease), poll=1.0)

    try:
        await serve(backend, attach=attach, model=model, extensions=[telegram_extension(settings, listen=False)])
    finally:
        if model._session is not None:
            await model._session.close()


async def _set_schedules(listed: Path, store: Any, settings: Any, model: RemoteEcho) -> None:
    """Store the schedules ``listed`` names, in the Telegram chats they name, as a bot author's code would."""
    from core import create_agent
    from core.schedules import Schedules
    from extensions.telegram import telegram_extension
    from tests.agent_args import agent_args

    agent = create_agent(**agent_args(model=model, extensions=[telegram_extension(settings, listen=False)]))
    schedules = Schedules.attach(agent, store, fire=False)
    chat = agent.contexts["telegram:chat"]
    for item in json.loads(await asyncio.to_thread(listed.read_text)):
        at = datetime.fromtimestamp(item["at"], UTC)
        where = {"chat_id": item["chat"]}
        if item.get("every"):
            await schedules.every(chat, where, item["every"], start=at, text=item["text"])
        else:
            await schedules.once(chat, where, at=at, text=item["text"])


def main() -> None:
    p = worker_arguments()
    p.add_argument("--sentinels", default="")
    p.add_argument("--min-replicas", type=int, default=0)
    p.add_argument("--lease", type=float, default=3.0)
    p.add_argument("--model-url", required=True)
    p.add_argument("--schedules", action="store_true", help="fire the fleet's schedules too")
    p.add_argument("--set-schedules", default="", help="store the schedules this JSON file lists, and exit")
    run(_work, p, level="WARNING")


if __name__ == "__main__":
    main()
