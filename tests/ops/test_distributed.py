"""``bots gateway`` and ``bots worker`` as real processes, with a real redis-server and the fake Telegram
Bot API: a message goes through the queue and is answered, each process serves its endpoints, the reply's
log line in the worker carries the id of the incoming update, and SIGTERM stops both cleanly."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import aiohttp

from bots.models import SCRIPTED_REPLY
from tests.bots_fleet import DEADLINE, Process, env_for, start_fleet
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer, free_port


async def test_gateway_and_worker_answer_through_redis_and_stop_on_sigterm(
    tmp_path: Path, telegram: FakeTelegramServer, redis_server: RedisServer, processes: list[Process]
) -> None:
    shared = {
        "REDIS_URL": redis_server.url,
        "TELEGRAM_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.api_url,
        "LOG_CONTENT": "true",
    }
    gateway, [worker] = await start_fleet(tmp_path, shared, processes)

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        for process, expected in ((gateway, {"agent", "redis"}), (worker, {"agent", "model", "redis"})):
            status, body = await process.get(http, "/readyz")
            assert status == 200, (process.command, body)
            checks = json.loads(body)["checks"]
            assert expected <= set(checks), checks
            assert all(v == "ok" for v in checks.values()), checks
            assert (await process.get(http, "/healthz"))[0] == 200

        update = telegram.user_says("hello through the queue")
        replies = await telegram.wait_replies(1, timeout=DEADLINE)
        assert replies[0].text == SCRIPTED_REPLY

        posted = await worker.wait_for("reply:")  # the worker's content log of the reply it posted
        assert posted["correlation_id"] == f"telegram:{update['update_id']}"

        # the run is counted when it ends (memory saved), a moment after the reply was posted; nothing in
        # another process can be awaited for that, so read /metrics until it shows (bounded)
        answered = 'bots_messages_answered_total{platform="telegram"} 1.0'
        async with asyncio.timeout(DEADLINE):
            while answered not in (metrics := (await worker.get(http, "/metrics"))[1]):
                await asyncio.sleep(0.02)
        assert 'bots_reply_seconds_count{platform="telegram"} 1.0' in metrics
        assert 'bots_model_seconds_count{model="scripted"} 1.0' in metrics
        assert "bots_worker_up 1.0" in metrics  # (the alert BotsNoWorker sums it over the fleet)
        assert "bots_worker_up 0.0" in (await gateway.get(http, "/metrics"))[1]

    for process in (gateway, worker):
        code = await process.terminate()
        assert code == 0, (process.command, process.lines[-5:])
    assert any("worker stopped" in line.get("message", "") for line in worker.lines)
    assert telegram.token not in json.dumps(gateway.lines + worker.lines)


async def test_a_worker_whose_redis_does_not_answer_stops_with_one_line(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bots.cli",
        "worker",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=env_for(tmp_path, REDIS_URL=url),
    )
    async with asyncio.timeout(DEADLINE):
        _, err = await proc.communicate()
    assert proc.returncode == 2
    lines = err.decode().strip().splitlines()
    assert lines[0] == "bots: cannot start:"
    assert lines[1].startswith(f"  REDIS_URL={url!r} does not answer (")
    assert len(lines) == 2, lines
