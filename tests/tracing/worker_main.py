"""A queue worker process for the tracing tests (``python -m tests.tracing.worker_main``): the Telegram extension
without listening, a model that reports its tokens, tracing on with the OTLP/HTTP exporter (``OTEL_*`` from the
environment). The message ``please hang now`` makes the first worker that runs it hang (it leaves ``--marker``
behind), so a test can kill it mid-run and watch another worker take the batch over."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from bots.tracing import TracingSettings, start_tracing
from core import ModelRequest
from core.fleet import QueueConfig, RedisBackend
from core.models.base import ModelUsage, report_usage
from tests.fleet.worker_process import run, serve, worker_arguments

from .conftest import INPUT_TOKENS, OUTPUT_TOKENS

LEASE = 2.0
HANG = "please hang now"


class HangingOnce:
    """``CountingModel``, except that the first run of the message ``HANG`` never ends (the whole phrase: the prompt's
    own words hold "hang", in "change")."""

    name = "fake:counting"
    model = "counting-1"
    vision = False
    last_usage = None

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        if HANG in request.prompt and not self.marker.exists():
            self.marker.write_text("hung")
            await asyncio.sleep(3600)
        yield '<response><output type="telegram:message">'
        yield "done"
        report_usage(ModelUsage(input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS))
        yield "</output></response>"


async def _work(args: argparse.Namespace) -> None:
    from extensions.telegram import TelegramSettings, telegram_extension

    backend = RedisBackend(QueueConfig(url=args.url, lease_seconds=LEASE, retry_seconds=30.0))
    settings = TelegramSettings(token=args.token, api_url=args.api_url, rate_limit=0)
    with start_tracing(TracingSettings(enabled=True), role="worker"):
        await serve(
            backend, model=HangingOnce(Path(args.marker)), extensions=[telegram_extension(settings, listen=False)]
        )


def main() -> None:
    p = worker_arguments()
    p.add_argument("--marker", required=True)
    run(_work, p, level="INFO")


if __name__ == "__main__":
    main()
