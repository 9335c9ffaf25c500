"""A gateway (``bots gateway``) and two queue workers as real processes on a real redis-server, exporting over
OTLP/HTTP to a receiver in this test: one message is one trace across the queue (the update and the ingest in the
gateway, the inbox wait, the batch's run, the model call with its tokens and the post in a worker), and a worker
killed mid-run leaves a trace that the worker taking the batch over continues."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.deployment import deployment_env
from tests.fleet.server import RedisServer, free_port
from tests.fleet.worker_process import Spawned, kill

from .conftest import INPUT_TOKENS, OUTPUT_TOKENS
from .receiver import OtlpReceiver, Received
from .worker_main import LEASE

SECRET = "tell nobody about the blue door"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    async with OtlpReceiver() as found:
        yield found


class Fleet(Spawned):
    def __init__(
        self, folder: Path, redis_server: RedisServer, telegram: FakeTelegramServer, receiver: OtlpReceiver
    ) -> None:
        super().__init__(folder)
        self.redis_server, self.telegram, self.receiver = redis_server, telegram, receiver
        self.workers: dict[str, subprocess.Popen[bytes]] = {}

    def _otel(self, name: str) -> dict[str, str]:
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_RESOURCE_ATTRIBUTES": f"process.name={name}",
        }

    def gateway(self) -> None:
        env = deployment_env(
            self.redis_server,
            self.folder,
            telegram=self.telegram,
            TELEGRAM_POLL_TIMEOUT="5",
            LLM_PROVIDER="scripted",
            HTTP_PORT=str(free_port()),
            TRACING_ENABLED="true",
            **self._otel("gateway"),
        )
        self.spawn("gateway", [sys.executable, "-m", "bots.cli", "gateway"], env=env)

    def worker(self, name: str) -> None:
        env = deployment_env(self.redis_server, self.folder, **self._otel(name))
        args = [sys.executable, "-m", "tests.tracing.worker_main", "--url", self.redis_server.url]
        args += ["--api-url", self.telegram.api_url, "--token", self.telegram.token]
        self.workers[name] = self.spawn(name, [*args, "--marker", str(self.folder / "hung")], env=env)


@pytest.fixture
def fleet(
    tmp_path: Path, redis_server: RedisServer, telegram: FakeTelegramServer, receiver: OtlpReceiver
) -> Iterator[Fleet]:
    found = Fleet(tmp_path, redis_server, telegram, receiver)
    try:
        yield found
    finally:
        found.stop_all()


def _one(spans: list[Received], name: str, trace_id: str) -> Received:
    [found] = [s for s in spans if s.name == name and s.trace_id == trace_id]
    return found


async def test_one_message_is_one_trace_across_gateway_queue_and_worker(
    fleet: Fleet, telegram: FakeTelegramServer, receiver: OtlpReceiver
) -> None:
    fleet.gateway()
    fleet.worker("w0")
    fleet.worker("w1")
    telegram.user_says(SECRET, user_id=4242)
    [reply] = await telegram.wait_replies(1, timeout=60)
    assert reply.text == "done"
    spans = await receiver.wait_for(lambda spans: [s for s in spans if s.name == "telegram sendMessage"])
    trace_id = spans[0].trace_id
    for last in ("ingest", "run batch"):  # the batch's span ends after the reply is posted and the run recorded
        await receiver.wait_for(lambda spans, n=last: [s for s in spans if s.name == n and s.trace_id == trace_id])
    spans = receiver.spans
    update = _one(spans, "telegram update", trace_id)
    ingest = _one(spans, "ingest", trace_id)
    wait = _one(spans, "inbox wait", trace_id)
    batch = _one(spans, "run batch", trace_id)
    run = _one(spans, "invoke_agent telegram:chat", trace_id)
    model = _one(spans, "chat counting-1", trace_id)
    post = _one(spans, "telegram sendMessage", trace_id)
    assert update.resource["service.name"] == "bots-gateway" and ingest.parent_id == update.span_id
    assert ingest.attributes["bots.ingest.result"] == "scheduled"
    assert wait.parent_id == ingest.span_id and batch.parent_id == ingest.span_id
    assert wait.start_ns <= wait.end_ns and wait.resource["process.name"] == batch.resource["process.name"]
    assert batch.resource["process.name"] in ("w0", "w1") and batch.attributes["bots.batch.attempt"] == 1
    assert model.attributes["gen_ai.usage.input_tokens"] == INPUT_TOKENS
    assert model.attributes["gen_ai.usage.output_tokens"] == OUTPUT_TOKENS
    assert model.attributes["gen_ai.request.model"] == "counting-1"
    assert run.span_id in {s.parent_id for s in spans if s.name == "step"}
    assert post.attributes["http.response.status_code"] == 200
    texts = [str(v) for s in spans for v in s.attributes.values()]
    assert not [t for t in texts if "blue door" in t or t == "4242"]  # capture off: no text, ids hashed


async def test_a_worker_killed_mid_run_leaves_a_trace_the_next_worker_continues(
    fleet: Fleet, telegram: FakeTelegramServer, receiver: OtlpReceiver
) -> None:
    fleet.gateway()
    fleet.worker("w0")
    fleet.worker("w1")
    telegram.user_says("please hang now")
    [first_wait] = await receiver.wait_for(lambda spans: [s for s in spans if s.name == "inbox wait"], timeout=60)
    hung = first_wait.resource["process.name"]
    # killed once its run hangs in the model (the marker written), not between taking the batch and calling the
    # model: killed there on a crowded machine, the next worker's run was the first to reach the model, and hung
    marker = fleet.folder / "hung"
    async with asyncio.timeout(60):
        while not marker.exists():
            await asyncio.sleep(0.05)
    kill(fleet.workers[hung])
    [reply] = await telegram.wait_replies(1, timeout=60 + LEASE)
    assert reply.text == "done"
    trace_id = first_wait.trace_id
    [batch] = await receiver.wait_for(
        lambda spans: [s for s in spans if s.name == "run batch" and s.trace_id == trace_id]
    )
    assert batch.resource["process.name"] != hung
    assert batch.attributes["bots.batch.attempt"] == 2
    ingest = _one(receiver.spans, "ingest", trace_id)
    assert batch.parent_id == ingest.span_id == first_wait.parent_id
    post = _one(receiver.spans, "telegram sendMessage", trace_id)
    assert post.resource["process.name"] != hung
    assert receiver.batches >= 2
