"""End to end (issue 54): a poll a worker posts, voted in, its vote read by the bot, in a fleet. The worker that
answers posts the poll; the vote reaches ``bots gateway`` (Telegram's poll_answer names the poll, not its chat),
which finds the poll in Redis (``core.fleet.RedisAnswerBook``) and hands the vote to the poll's conversation; a worker
answers it under the poll. ``bots gateway`` and a queue worker as processes, the fake Bot API, a real redis-server."""

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

from .conftest import wait_until
from .deployment import deployment_env
from .server import RedisServer
from .worker_process import Spawned, run, serve, worker_arguments

POLL = '{"question": "Tea or coffee?", "options": ["Tea", "Coffee"]}'


def model(request: ModelRequest) -> str:
    if "chose 'Coffee' in the poll 'Tea or coffee?'" in request.prompt:
        return '<response><output type="telegram:message">Coffee it is, Ann.</output></response>'
    return f'<response><output type="telegram:poll">{POLL}</output></response>'


async def _work(args: argparse.Namespace) -> None:
    from extensions.telegram import TelegramSettings, telegram_extension

    backend = RedisBackend(QueueConfig(url=args.url, lease_seconds=5.0))
    settings = TelegramSettings(token=args.token, api_url=args.api_url, stream_replies=False, rate_limit=0)
    answers = RedisAnswerBook(backend)  # (what bots worker gives its platforms: FleetRole.fleet_options)
    extension = telegram_extension(settings, listen=False, answers=answers)
    await serve(backend, model=ScriptedModel(model), extensions=[extension])


@pytest.fixture
def spawned(tmp_path: Path) -> Iterator[Spawned]:
    procs = Spawned(tmp_path)
    yield procs
    procs.stop_all()


async def test_a_vote_reaching_the_gateway_finds_the_poll_a_worker_posted(
    redis_server: RedisServer, telegram: FakeTelegramServer, spawned: Spawned, tmp_path: Path, client: Any
) -> None:
    worker = [sys.executable, "-m", "tests.fleet.test_e2e_telegram_polls", "--url", redis_server.url]
    spawned.spawn("worker", [*worker, "--api-url", telegram.api_url, "--token", telegram.token])
    env = deployment_env(redis_server, tmp_path, telegram=telegram, REDIS_LEASE_SECONDS="5", TELEGRAM_POLL_TIMEOUT="1")
    env["LLM_PROVIDER"] = "scripted"
    spawned.spawn("gateway", [sys.executable, "-m", "bots.cli", "gateway"], env=env)
    asked = telegram.user_says("ask me tea or coffee", user_id=6100)
    await telegram.wait_for(lambda: bool(telegram.polls), timeout=60)
    [(poll_id, poll)] = telegram.polls.items()
    assert poll["question"] == "Tea or coffee?"
    # (Telegram has the poll before the worker hears back that it was posted and notes it: a vote before that is left)
    noted = f"bots:answer:telegram:poll:{poll_id}"
    await wait_until(lambda: client.get(noted), timeout=60, what="the worker noting its poll")
    telegram.user_answers_poll(poll_id, [1], user_id=6100, first_name="Ann")
    [reply] = await telegram.wait_replies(1, timeout=60)
    assert reply.text == "Coffee it is, Ann." and reply.chat_id == asked["message"]["chat"]["id"]
    _, message_id = telegram.poll_messages[poll_id]
    assert reply.reply_to == message_id  # the answer replies to the poll
    assert "which the bot did not post lately" not in (tmp_path / "gateway-1.log").read_text()


def main() -> None:
    run(_work, worker_arguments(), level="INFO")


if __name__ == "__main__":
    main()
