"""Webhooks in one process (``bots run``): a signed event is answered in its conversation once; each kind of
refused request gets the status that says why, and nothing reaches the conversation (the model is never called).
Requests go over real HTTP to the process's endpoint server (``bots.ops``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from bots.ops import Ops, serve
from core import ModelRequest, ScriptedModel, context, create_agent, output
from core.trust import Tier
from core.webhooks import Webhooks, WebhookSource, github_signature, sign
from core.webhooks.store import MemoryWebhookStore

SECRET = "s3cret-s3cret-s3cret"
chat = context(type="chat", schema=str, key=lambda s: s)


def answer(request: ModelRequest) -> str:
    return '<response><output type="chat:message">the build failed, I told the team</output></response>'


class Setup:
    def __init__(self, clock: Callable[[], float] | None = None, **source: Any) -> None:
        self.posted: list[tuple[str, str]] = []
        say = output(type="chat:message", handler=lambda data, ctx, ag: self.posted.append((ctx.state.key, data)))
        self.model = ScriptedModel(answer)
        sources = [
            WebhookSource(name="ci", secret=SECRET, context="chat", args="team", prompt="Tell the team.", **source),
            WebhookSource(name="gh", secret=SECRET, scheme="github", context="chat", args="team", prompt="Say it."),
        ]
        self.hooks = Webhooks(sources, store=MemoryWebhookStore(clock=clock) if clock is not None else None)
        self.agent = create_agent(model=self.model, contexts=[chat], outputs=[say], plugins=[self.hooks])
        self.ops = Ops(registry=CollectorRegistry())
        self.url = ""

    async def post(self, name: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{self.url}/hooks/{name}", data=body, headers=headers) as response,
        ):
            return response.status, await response.json()


@pytest.fixture
async def setup(request: pytest.FixtureRequest) -> AsyncIterator[Setup]:
    found = Setup(**getattr(request, "param", {}))
    async with found.agent, serve(found.ops, host="127.0.0.1", port=0) as port:
        found.ops.add_webhooks(found.hooks)
        found.url = f"http://127.0.0.1:{port}"
        yield found


def signed(body: bytes, *, at: float | None = None, delivery: str | None = "d-1") -> dict[str, str]:
    ts = int(time.time() if at is None else at)
    headers = {"X-Webhook-Timestamp": str(ts), "X-Webhook-Signature": sign(SECRET, body, ts)}
    if delivery:
        headers["X-Webhook-Id"] = delivery
    return headers


BODY = json.dumps({"pipeline": "main", "status": "failed"}).encode()


async def settle(setup: Setup, count: int) -> None:
    for _ in range(500):
        if len(setup.posted) >= count:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)


async def test_a_signed_event_is_answered_in_its_conversation_once(setup: Setup) -> None:
    status, said = await setup.post("ci", BODY, signed(BODY))
    assert (status, said["status"]) == (202, "queued")
    await settle(setup, 1)
    assert setup.posted == [("team", "the build failed, I told the team")]
    [request] = setup.model.requests
    assert "Tell the team." in request.prompt and "failed" in request.prompt
    again, said = await setup.post("ci", BODY, signed(BODY))  # replayed: the same signed request
    assert again == 409 and said["reason"].startswith("replayed")
    redelivered = await setup.post("ci", BODY, signed(BODY, at=time.time() - 2))  # signed again, same delivery id
    assert redelivered[0] == 409
    await settle(setup, 2)
    assert len(setup.posted) == 1 and len(setup.model.requests) == 1


async def test_github_preset(setup: Setup) -> None:
    headers = {
        "X-Hub-Signature-256": github_signature(SECRET, BODY),
        "X-GitHub-Delivery": "g-1",
        "X-GitHub-Event": "push",
    }
    assert (await setup.post("gh", BODY, headers))[0] == 202
    assert (await setup.post("gh", BODY, headers))[0] == 409
    wrong = dict(headers, **{"X-Hub-Signature-256": github_signature("another-secret-entirely", BODY)})
    assert (await setup.post("gh", BODY, wrong))[0] == 403
    await settle(setup, 1)
    assert len(setup.posted) == 1


async def refused(setup: Setup, name: str, body: bytes, headers: dict[str, str], status: int, reason: str) -> None:
    got, said = await setup.post(name, body, headers)
    assert (got, said["status"]) == (status, "refused")
    assert said["reason"].startswith(reason), said
    await asyncio.sleep(0.1)
    assert setup.posted == [] and setup.model.requests == []


async def test_unsigned(setup: Setup) -> None:
    await refused(setup, "ci", BODY, {}, 401, "unsigned")
    no_time = signed(BODY)
    del no_time["X-Webhook-Timestamp"]
    await refused(setup, "ci", BODY, no_time, 401, "unsigned")
    await refused(setup, "gh", BODY, {"X-GitHub-Delivery": "x"}, 401, "unsigned")


async def test_badly_signed(setup: Setup) -> None:
    await refused(setup, "ci", BODY + b" ", signed(BODY), 403, "bad signature")  # the body changed on the way
    forged = signed(BODY)
    forged["X-Webhook-Timestamp"] = str(int(time.time()) + 1)  # the timestamp changed: the signature covers it
    await refused(setup, "ci", BODY, forged, 403, "bad signature")


async def test_oversized(setup: Setup) -> None:
    big = b"x" * 300_000
    await refused(setup, "ci", big, signed(big), 413, "oversized")


async def test_late(setup: Setup) -> None:
    await refused(setup, "ci", BODY, signed(BODY, at=time.time() - 3600), 400, "late")
    await refused(setup, "ci", BODY, signed(BODY, at=time.time() + 3600), 400, "late")


async def test_unknown_source(setup: Setup) -> None:
    await refused(setup, "nobody", BODY, signed(BODY), 404, "no webhook source")


# the clock stopped mid-minute: requests counted by the minute they come in, four sent across a minute's turn (a
# crowded machine took seconds over them) would be counted in two
@pytest.mark.parametrize("setup", [{"per_minute": 2, "clock": lambda: 90.0}], indirect=True)
async def test_rate_limited_per_source(setup: Setup) -> None:
    statuses = []
    for n in range(4):
        body = json.dumps({"n": n}).encode()
        status, _ = await setup.post("ci", body, signed(body, delivery=f"r-{n}"))
        statuses.append(status)
    assert statuses[:2] == [202, 202] and statuses[2:] == [429, 429]
    gh = {"X-Hub-Signature-256": github_signature(SECRET, BODY), "X-GitHub-Delivery": "other"}
    assert (await setup.post("gh", BODY, gh))[0] == 202  # another source has its own count
    await settle(setup, 3)
    assert len(setup.posted) == 3


def test_a_source_needs_a_name_and_a_long_secret() -> None:
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="name"):
        WebhookSource(name="a/b", secret=SECRET, context="chat", args="x", prompt="p")
    with pytest.raises(ConfigError, match="16 characters"):
        WebhookSource(name="a", secret="short", context="chat", args="x", prompt="p", tier=Tier.GUEST)
