"""End to end (issue 54): a checklist a worker posts for a Telegram Business account, a task marked done, read by
the bot, in a fleet. ``bots gateway`` learns the business connection and hands the person's message (a
``business_message``) to a worker, which posts the checklist through the connection; the task marked done comes back
to the gateway as a service message, goes to the chat's conversation, and a worker answers it on the account's behalf,
under the checklist. ``bots gateway`` and a queue worker as processes, the fake Bot API, a real redis-server."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core import ModelRequest, ScriptedModel
from core.fleet import QueueConfig, RedisAnswerBook, RedisBackend
from tests.fakes.telegram_server import FakeTelegramServer

from .deployment import deployment_env
from .server import RedisServer
from .worker_process import Spawned, run, serve, worker_arguments

CHECKLIST = '{"title": "Moving day", "tasks": ["Book the van", "Pack the books"]}'


def model(request: ModelRequest) -> str:
    if "marked 'Book the van' as done in the checklist 'Moving day'" in request.prompt:
        return '<response><output type="telegram:message">Well done, Ann: the van is booked.</output></response>'
    return f'<response><output type="telegram:checklist">{CHECKLIST}</output></response>'


async def _work(args: argparse.Namespace) -> None:
    from extensions.telegram import TelegramSettings, telegram_extension

    backend = RedisBackend(QueueConfig(url=args.url, lease_seconds=5.0))
    settings = TelegramSettings(token=args.token, api_url=args.api_url, stream_replies=False, rate_limit=0)
    extension = telegram_extension(settings, listen=False, answers=RedisAnswerBook(backend))
    await serve(backend, model=ScriptedModel(model), extensions=[extension])


@pytest.fixture
def spawned(tmp_path: Path) -> Iterator[Spawned]:
    procs = Spawned(tmp_path)
    yield procs
    procs.stop_all()


async def test_a_checklist_a_worker_posts_for_a_business_and_its_task_done_read(
    redis_server: RedisServer, telegram: FakeTelegramServer, spawned: Spawned, tmp_path: Path, client: Any
) -> None:
    worker = [sys.executable, "-m", "tests.fleet.test_e2e_telegram_checklists", "--url", redis_server.url]
    spawned.spawn("worker", [*worker, "--api-url", telegram.api_url, "--token", telegram.token])
    env = deployment_env(redis_server, tmp_path, telegram=telegram, REDIS_LEASE_SECONDS="5", TELEGRAM_POLL_TIMEOUT="1")
    env["LLM_PROVIDER"] = "scripted"
    spawned.spawn("gateway", [sys.executable, "-m", "bots.cli", "gateway"], env=env)
    telegram.connect_business("biz-1", owner_id=6200, first_name="Bea's Moves")
    asked = telegram.user_says("help me plan my move", user_id=6100, first_name="Ann", business="biz-1")
    await telegram.wait_for(lambda: bool(telegram.checklists), timeout=60)
    [((chat_id, message_id), checklist)] = telegram.checklists.items()
    assert chat_id == 6100 and [t["text"] for t in checklist["tasks"]] == ["Book the van", "Pack the books"]
    [create] = telegram.calls_of("sendChecklist")
    assert create.params["business_connection_id"] == "biz-1"
    assert create.params["reply_parameters"]["message_id"] == asked["business_message"]["message_id"]
    telegram.user_marks_tasks(6100, message_id, done=[1], user_id=6100, first_name="Ann")
    [reply] = await telegram.wait_replies(1, timeout=60)
    assert reply.text == "Well done, Ann: the van is booked."
    assert reply.business_connection_id == "biz-1" and reply.chat_id == 6100
    assert reply.reply_to == message_id  # the answer replies to the checklist


def main() -> None:
    run(_work, worker_arguments(), level="INFO")


if __name__ == "__main__":
    main()
