"""Backoff, Retry-After parsing, redaction and the retrying stream on their own."""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncGenerator

import pytest

from core.errors import ModelAuthError, ModelError
from core.models.retry import Failure, RetryPolicy, http_failure, parse_retry_after, redact, retrying_stream, safe_url

from .support import Sleeps


def test_backoff_doubles_within_a_cap_with_full_jitter() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0)
    for attempt, window in enumerate([0.5, 1.0, 2.0, 3.0, 3.0]):
        delays = [policy.delay(attempt) for _ in range(200)]
        assert all(0.0 <= d <= window for d in delays)
        assert max(delays) > window / 2  # jitter spreads over the window
    assert policy.delay(5, retry_after=12.5) == 12.5


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after": "soon"}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    seconds = parse_retry_after({"retry-after": when})
    assert seconds is not None and 25 <= seconds <= 31


def test_redact_and_safe_url() -> None:
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz"
    assert key not in redact(f"bad key {key}!", key)
    assert "uvwxyz" not in redact("Incorrect API key provided: sk-proj-****uvwxyz", key)
    assert redact("nothing to hide", None) == "nothing to hide"
    assert safe_url("https://bob:hunter2@example.com:8443/v1") == "https://example.com:8443/v1"
    assert safe_url("http://127.0.0.1:11434/v1") == "http://127.0.0.1:11434/v1"


def test_http_failure_classes() -> None:
    def fail(status: int) -> Failure:
        return http_failure(status, "detail", where="X", model="m", retry_after=1.0)

    assert isinstance(fail(401).error, ModelAuthError) and not fail(401).retryable
    assert isinstance(fail(403).error, ModelAuthError)
    assert fail(429).retryable and fail(429).retry_after == 1.0
    assert fail(500).retryable and fail(529).retryable and fail(408).retryable
    assert not fail(400).retryable and not fail(404).retryable
    assert "LLM_API_KEY" in str(fail(401).error) and "LLM_MODEL" in str(fail(404).error)


class Flaky:
    """Fails ``failures`` times before the first chunk, then streams."""

    def __init__(self, failures: int, *, fail_after_first: bool = False) -> None:
        self.failures = failures
        self.fail_after_first = fail_after_first
        self.calls = 0
        self.closed = 0

    async def open(self) -> AsyncGenerator[str, None]:
        self.calls += 1
        try:
            if self.calls <= self.failures:
                raise ConnectionError("down")
            yield "a"
            if self.fail_after_first:
                raise ConnectionError("cut")
            yield "b"
        finally:
            self.closed += 1


def classify(exc: Exception) -> Failure | None:
    if isinstance(exc, ConnectionError):
        return Failure(error=ModelError(f"link {exc}"), retryable=True)
    return None


async def test_retrying_stream_retries_before_the_first_chunk() -> None:
    sleeps = Sleeps()
    flaky = Flaky(2)
    policy = RetryPolicy(retries=3, base_delay=0.1, sleep=sleeps)
    got = [c async for c in retrying_stream(flaky.open, policy=policy, classify=classify, label="t")]
    assert got == ["a", "b"] and flaky.calls == 3 and len(sleeps.delays) == 2


async def test_retrying_stream_never_retries_after_text() -> None:
    flaky = Flaky(0, fail_after_first=True)
    policy = RetryPolicy(retries=3, sleep=Sleeps())
    got: list[str] = []
    with pytest.raises(ModelError, match="link cut"):
        async for chunk in retrying_stream(flaky.open, policy=policy, classify=classify, label="t"):
            got.append(chunk)
    assert got == ["a"] and flaky.calls == 1


async def test_retrying_stream_gives_up_and_says_so() -> None:
    flaky = Flaky(10)
    policy = RetryPolicy(retries=2, sleep=Sleeps())
    with pytest.raises(ModelError, match="after 2 retries; raise LLM_RETRIES"):
        [c async for c in retrying_stream(flaky.open, policy=policy, classify=classify, label="t")]
    assert flaky.calls == 3


async def test_closing_early_closes_the_attempt() -> None:
    flaky = Flaky(0)
    policy = RetryPolicy(sleep=Sleeps())
    stream = retrying_stream(flaky.open, policy=policy, classify=classify, label="t")
    assert await anext(stream) == "a"
    await stream.aclose()
    assert flaky.closed == 1


async def test_unknown_exceptions_pass_through() -> None:
    async def broken() -> AsyncGenerator[str, None]:
        raise ModelError("already ours")
        yield "never"

    with pytest.raises(ModelError, match="already ours"):
        [c async for c in retrying_stream(broken, policy=RetryPolicy(), classify=classify, label="t")]
