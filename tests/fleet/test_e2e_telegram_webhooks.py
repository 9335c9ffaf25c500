"""Telegram webhooks spread over two active ``bots gateway`` processes behind a round-robin load balancer,
with the fake Bot API, a real redis-server and a ``bots worker``: both gateways store updates (neither
stands by), every update is stored once and answered once; one gateway killed with ``kill -9`` costs
nothing (the balancer answers 502 for it, Telegram delivers the update again, the other gateway stores it)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from tests.fakes.load_balancer import RoundRobin
from tests.fakes.telegram_server import FakeTelegramServer
from tests.ports import free_port

from .conftest import wait_until
from .deployment import Processes, deployment_env
from .server import RedisServer
from .test_e2e_telegram import answered_once

PATH = "/telegram/hook"


async def inbox_total(client: Any) -> int:
    return sum([await client.llen(key) for key in await client.keys("bots:{telegram:*}:inbox")])


async def test_two_gateways_store_every_webhook_update_once(
    redis_server: RedisServer, telegram: FakeTelegramServer, tmp_path: Path, client: Any
) -> None:
    ports = [free_port(), free_port()]
    balancer = RoundRobin([f"http://127.0.0.1:{port}" for port in ports])
    await balancer.start()
    env = deployment_env(
        redis_server,
        tmp_path,
        telegram=telegram,
        REDIS_LEASE_SECONDS="1",
        TELEGRAM_MODE="webhook",
        TELEGRAM_WEBHOOK_URL=balancer.url + PATH,
        TELEGRAM_WEBHOOK_LISTEN="127.0.0.1",
        TELEGRAM_WEBHOOK_SECRET="webhook-secret-for-tests-0123456789abcdef",
        LLM_PROVIDER="scripted",
    )
    deployment = Processes(tmp_path, env)
    try:
        gateways = []
        for port in ports:
            deployment.env["TELEGRAM_WEBHOOK_PORT"] = str(port)
            gateways.append(await deployment.start("gateway"))
        for gateway in gateways:  # both active: none stands by
            await wait_until(lambda g=gateway: "gateway listening" in deployment.log_of(g), timeout=60, what="both")
        asked = [telegram.user_says(f"hello {u}", user_id=u) for u in range(7000, 7010)]
        await telegram.wait_for(lambda: not telegram.pending, timeout=60)  # each answered 200: stored
        assert await inbox_total(client) == len(asked)
        assert all(balancer.answered[b] > 0 for b in balancer.backends), balancer.answered  # both stored some
        for update in asked[:3]:  # Telegram delivers some again: dropped as duplicates, still 200
            telegram.push(update)
        await telegram.wait_for(lambda: not telegram.pending, timeout=60)
        assert await inbox_total(client) == len(asked)

        await deployment.start("worker")
        await telegram.wait_replies(len(asked), timeout=60)
        gateways[0].send_signal(signal.SIGKILL)
        await gateways[0].wait()
        asked += [telegram.user_says(f"again {u}", user_id=u) for u in range(7000, 7010)]
        await telegram.wait_replies(len(asked), timeout=60)
        assert balancer.failed[balancer.backends[0]] > 0  # those went to the other gateway on the next try
        await deployment.stop_all()
    finally:
        await deployment.stop_all()
        await balancer.close()
    answered_once(telegram, asked)
    delivered = {uid for uid, status in telegram.webhook_deliveries if status == 200}
    assert delivered == {u["update_id"] for u in asked}  # each in the end answered 200 (stored)
    assert gateways[1].returncode == 0, deployment.log_of(gateways[1])[-2000:]
