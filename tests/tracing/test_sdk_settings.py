"""The SDK's own ``OTEL_*`` variables with ``TRACING_ENABLED``: what it would crash on or log with a traceback is one
line naming the variable at the start, and the exporter's headers (an authorization token) never reach the log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bots.settings import Settings
from bots.tracing import TracingSettings, header_secrets, tracing_problems
from tests.ports import free_port

ON = TracingSettings(enabled=True)
SECRET = "sekrit-collector-token-42"


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        (
            {"OTEL_EXPORTER_OTLP_HEADERS": f"Authorization: Bearer {SECRET}"},
            "OTEL_EXPORTER_OTLP_HEADERS: an item has no",
        ),
        ({"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=1,b"}, "OTEL_EXPORTER_OTLP_TRACES_HEADERS: an item has no '='"),
        ({"OTEL_BSP_SCHEDULE_DELAY": "5s"}, "OTEL_BSP_SCHEDULE_DELAY='5s' is not a whole number above 0"),
        ({"OTEL_BSP_SCHEDULE_DELAY": "-1"}, "OTEL_BSP_SCHEDULE_DELAY='-1' is not a whole number above 0"),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "0"}, "OTEL_BSP_MAX_QUEUE_SIZE='0' is not a whole number above 0"),
        ({"OTEL_BSP_EXPORT_TIMEOUT": "-1"}, "OTEL_BSP_EXPORT_TIMEOUT='-1' is not a whole number of 0 or more"),
        ({"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4096"}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE is above OTEL_BSP_MAX_QUEUE_SIZE"),
    ],
)
def test_what_the_sdk_cannot_use_is_one_line_naming_it(environ: dict[str, str], says: str) -> None:
    [line] = tracing_problems(ON, environ)
    assert line.startswith(says), line
    assert SECRET not in line
    assert tracing_problems(TracingSettings(enabled=False), environ) == []  # off, the SDK reads none of them


def test_what_the_sdk_reads_passes() -> None:
    fine = {
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc,x-tenant=bots",
        "OTEL_BSP_SCHEDULE_DELAY": "500",
        "OTEL_BSP_MAX_QUEUE_SIZE": "100",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "+100",
        "OTEL_BSP_EXPORT_TIMEOUT": "0",  # (the SDK takes both)
    }
    assert tracing_problems(ON, fine) == []
    masked = set(header_secrets(fine))
    assert {"Bearer%20abc", "Bearer abc"} <= masked
    assert "bots" not in masked  # a tenant id is not a secret: masking it would blank 'bots' in every log line
    long = header_secrets({"OTEL_EXPORTER_OTLP_HEADERS": "x-org=0123456789abcdef0123"})
    assert "0123456789abcdef0123" in long  # long enough to be a credential, whatever the header's name


def test_a_header_the_sdk_cannot_read_is_logged_masked(tmp_path: Path) -> None:
    """The SDK logs, as written, a header item whose name it cannot read: ``bots`` masks it like its own secrets."""
    port = free_port()  # nobody listens there
    groups = (*(f"{name.upper()}_" for name in Settings.model_fields), "OTEL_")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(groups)}
    env.update(
        LLM_PROVIDER="scripted",
        BOT_DATA_DIR=str(tmp_path / "data"),
        WEB_CHAT_ENABLED="false",
        TRACING_ENABLED="true",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
        OTEL_EXPORTER_OTLP_HEADERS=f"bad name=Bearer {SECRET}",
    )
    done = subprocess.run(
        [sys.executable, "-m", "bots.cli", "chat"],
        input="",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Header format invalid" in done.stderr  # the SDK's warning, still there
    assert SECRET not in done.stdout + done.stderr
