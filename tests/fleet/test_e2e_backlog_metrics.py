"""The backlog can be watched: a fleet (``bots gateway`` + ``bots worker`` on a real redis-server, the fake Bot API,
a model that does not answer yet) with three runs in flight (``REDIS_WORKER_CONCURRENCY=3``) and more messages
waiting. The worker's ``/metrics`` shows its three leases held and the queue depth (inputs waiting in the inboxes,
conversations waiting for a slot); when the model answers, the backlog drains and the gauges go back to 0."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

from tests.bots_fleet import DEADLINE, Process, model_settings, start_fleet, stop_all
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.conftest import wait_until
from tests.fleet.server import RedisServer

CHATS = (5001, 5002, 5003, 5004, 5005)


def gauge(metrics: str, name: str, **labels: str) -> float:
    """The value of one series of ``/metrics`` (0.0 when it is absent)."""
    shown = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"{name}{{{shown}}}" if labels else name
    found = re.search(rf"^{re.escape(series)} (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


async def test_queue_depth_and_leases_while_runs_are_in_flight_and_messages_wait(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    for chat in CHATS:
        telegram.chat(chat)
    async with FakeOpenAIServer(default=Reply(stall=True)) as model:
        settings = model_settings(
            redis_server, telegram, model.url, REDIS_WORKER_CONCURRENCY="3", REDIS_LEASE_SECONDS="3", LLM_TIMEOUT="120"
        )
        gateway, [worker] = await start_fleet(tmp_path, settings, processes)
        for chat in CHATS:
            telegram.user_says(f"hello from {chat}", user_id=chat, chat_id=chat)
        for chat in CHATS[:3]:  # two more waiting behind the runs in flight
            telegram.user_says(f"and another thing from {chat}", user_id=chat, chat_id=chat)
        async with aiohttp.ClientSession() as http:
            seen = {"metrics": ""}

            async def backlog_shown() -> bool:
                status, seen["metrics"] = await worker.get(http, "/metrics")
                m = seen["metrics"]
                return (
                    status == 200
                    and gauge(m, "bots_worker_leases_held") == 3.0
                    and gauge(m, "bots_queue_depth", queue="inbox") >= 2.0
                    and gauge(m, "bots_queue_depth", queue="jobs") == 2.0
                )

            await wait_until(backlog_shown, timeout=DEADLINE, what="three leases and the backlog in /metrics")
            metrics = seen["metrics"]
            # At least three: a second message that reaches a run before its first word restarts that run's model
            # call with both inputs (issue 51), which is one more request for the same run.
            await wait_until(lambda: len(model.requests) >= 3, what="the three runs in flight calling the model")
            assert gauge(metrics, "bots_worker_leases_total", event="claimed") >= 3.0
            assert gauge(metrics, "bots_queue_depth", queue="dead") == 0.0
            _, at_gateway = await gateway.get(http, "/metrics")
            assert gauge(at_gateway, "bots_messages_received_total", platform="telegram") == 8.0

            model.default = Reply(chunks=('<response><output type="telegram:message">ok</output></response>',))
            model._release.set()  # the stalled calls end (503: retried, then answered)

            async def drained() -> bool:
                _, m = await worker.get(http, "/metrics")
                return (
                    gauge(m, "bots_worker_leases_held") == 0.0
                    and gauge(m, "bots_queue_depth", queue="inbox") == 0.0
                    and gauge(m, "bots_queue_depth", queue="jobs") == 0.0
                    and len({s.chat_id for s in telegram.sent}) == len(CHATS)
                )

            await wait_until(drained, timeout=DEADLINE, what="the backlog drained")
    await stop_all(gateway, worker)
