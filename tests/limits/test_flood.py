"""A flood against the per-day token limits (issue 35): one user sends 300 messages to the bot's private chat on
the fake Telegram server as fast as it can while the model (a fake OpenAI-compatible server) takes its time to
answer, with ``BOT_TOKENS_PER_DAY_USER`` and ``BOT_TOKENS_PER_DAY_CONVERSATION`` set, in one process (``bots run``)
and in a fleet (``bots gateway`` and two ``bots worker`` on a real redis-server), without and with a history the
workers summarize (``DATABASE_URL``: a fleet keeps no history without one, so it makes no summary).

What the model was sent is read from its own requests (each estimated as the limits plugin does, a token for 4
characters; the fake reports the same figure as its usage, as a provider would): none carries more than the day's
budget or more than ``REDIS_BATCH_SIZE`` of the flood's messages, and together, answers included, they stay within
the day's budget (plus one answer: a call is allowed on what was spent before it, its answer counted after), and
none, a summary's included, carries a message that was not answered (the model never reads what a limit refused).

Each of the 300 messages is either answered (the model was asked about it, its answer was posted to the chat) or
refused by a limit: the operator's ``bots_limited`` counter (inputs refused by a limit, summed over the processes)
accounts for every message not answered, and for each limit that refused some, the chat got that limit's "Sorry"
notice (once per window, as the limits tell). Then another user is answered: the bot is still healthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from core.testing import updates_of
from tests.bots_fleet import DEADLINE, Process, env_for, start_fleet, stop_all
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer
from tests.fleet.server import RedisServer

MESSAGES = 300
BUDGET = 20_000
"""``BOT_TOKENS_PER_DAY_USER`` and ``BOT_TOKENS_PER_DAY_CONVERSATION``."""
BATCH = 20
"""``REDIS_BATCH_SIZE``: the inputs one run answers at most, in both deployments."""
DELAY = 0.3
"""Seconds the model waits before its first chunk."""
QUIET = 3.0
"""Seconds without a new model request or chat message after which the flood is taken as decided."""
FLOODER, OTHER = 7001, 7002
_MARK = re.compile(r"\bflood-(\d{3})\b")
_LIMITED = re.compile(r'^bots_limited_total\{limit="(\w+)",platform="telegram"\} (\S+)$', re.M)
_FILLER = " ".join(["a few words to make the message worth some tokens"] * 6)
NOTICES = {
    "user_tokens": ("you have used up what I can answer you", "of your daily budget"),
    "conversation_tokens": ("this conversation has used up", "of this conversation's daily budget"),
}
"""What the chat shows when a limit refuses: its notice for an input over a spent budget, and for a call that would
pass what is left of it."""


def flood_text(i: int) -> str:
    """Message ``i`` of the flood: its mark, then about 75 tokens of words."""
    return f"flood-{i:03d} {_FILLER}"


def tokens_of(body: dict[str, Any]) -> int:
    """The tokens a chat completions request sends, as the limits plugin estimates a call (4 characters a token)."""
    return sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4


def answer_of(n: int) -> str:
    return f'<response><output type="telegram:message">ok #{n}</output></response>'


class SlowModel(FakeOpenAIServer):
    """Answers request ``n`` (from 1) with ``ok #n`` on Telegram after ``DELAY``, and reports as its usage the
    tokens it was sent (``tokens_of``) and those of its answer, as a provider does."""

    def __init__(self) -> None:
        super().__init__()
        self.answered: set[int] = set()
        """The numbers of the requests whose answer was written whole."""

    async def __aenter__(self) -> SlowModel:
        await super().__aenter__()
        return self

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        n = next(i for i, r in enumerate(self.requests, start=1) if r.body is body)
        await asyncio.sleep(DELAY)
        answer = answer_of(n)
        await super().stream(response, Reply(chunks=(answer,), usage=(tokens_of(body), len(answer) // 4)), body)
        self.answered.add(n)

    def chats(self) -> list[dict[str, Any]]:
        """The bodies of the chat completions requests, in order (request ``n`` is at ``n - 1``)."""
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]


def marks_of(body: dict[str, Any]) -> list[int]:
    """The flood messages a request asks the model about: its updates (``core.testing.updates_of``), not the
    conversation before them, nor a summary's excerpt."""
    prompt = str(body["messages"][-1].get("content") or "")
    found = updates_of(prompt)
    return [int(m) for m in _MARK.findall(found)] if found else []


def settings(telegram: FakeTelegramServer, model: SlowModel) -> dict[str, str]:
    return {
        "TELEGRAM_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.api_url,
        "TELEGRAM_POLL_TIMEOUT": "1",
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": model.url,
        "LLM_API_KEY": "sk-test",
        "LLM_MODEL": "fake-model",
        "WEB_PORT": "0",
        "BOT_TOKENS_PER_DAY_USER": str(BUDGET),
        "BOT_TOKENS_PER_DAY_CONVERSATION": str(BUDGET),
        "REDIS_BATCH_SIZE": str(BATCH),
    }


@contextlib.asynccontextmanager
async def draining(running: Sequence[Process]) -> AsyncIterator[None]:
    """Read each process's log lines into ``Process.lines`` as they come (a full pipe would stall it)."""

    async def drain(process: Process) -> None:
        assert process.proc is not None and process.proc.stderr is not None
        async for raw in process.proc.stderr:
            decoded = raw.decode(errors="replace").strip()
            process.lines.append(json.loads(decoded) if decoded.startswith("{") else {"message": decoded})

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(drain(p)) for p in running]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()


async def flood(telegram: FakeTelegramServer, model: SlowModel) -> None:
    """The 300 messages at once; returns once nothing new happened for ``QUIET`` seconds (no model request, no
    chat message)."""
    for i in range(MESSAGES):
        telegram.user_says(flood_text(i), user_id=FLOODER)
    await telegram.wait_for(lambda: bool(telegram.sent), timeout=DEADLINE)
    seen = (-1, -1)
    async with asyncio.timeout(DEADLINE):
        while (now := (len(model.requests), len(telegram.sent))) != seen:
            seen = now
            await asyncio.sleep(QUIET)


async def limited(running: Sequence[Process]) -> dict[str, float]:
    """``bots_limited_total`` of Telegram by limit, summed over the processes' ``/metrics``."""
    totals: dict[str, float] = {}
    async with aiohttp.ClientSession() as http:
        for process in running:
            status, text = await process.get(http, "/metrics")
            assert status == 200, text
            for limit, value in _LIMITED.findall(text):
                totals[limit] = totals.get(limit, 0.0) + float(value)
    return totals


def answered_marks(telegram: FakeTelegramServer, model: SlowModel) -> set[int]:
    """The flood messages answered in the chat: those of each request whose answer was written whole and posted.
    A request the bot hung up on (not in ``model.answered``) is no answer lost: a message that came before any word
    of its answer was shown started the call again with it (core.busy); its messages are answered by a later
    request or refused, as ``problems_of`` requires."""
    posted = {m.text for m in telegram.sent if m.chat_id == FLOODER}
    answered: set[int] = set()
    for n, body in enumerate(model.chats(), start=1):
        if n in model.answered and f"ok #{n}" in posted:
            answered.update(marks_of(body))
    return answered


async def decided(telegram: FakeTelegramServer, model: SlowModel, running: Sequence[Process]) -> dict[str, float]:
    """The refusals by limit (``limited``) once every flood message is answered or refused, or after ``DEADLINE``
    (``problems_of`` then says what is missing). A refusal makes no model request and, after the first notice, no
    chat message, so ``flood``'s quiet time alone does not show that a loaded machine has decided them all."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + DEADLINE
    while True:
        refused = await limited(running)
        if len(answered_marks(telegram, model)) + sum(refused.values()) >= MESSAGES or loop.time() > give_up:
            return refused
        await asyncio.sleep(0.5)


def problems_of(telegram: FakeTelegramServer, model: SlowModel, refused: dict[str, float]) -> list[str]:
    """What went wrong with the flood, each said in full (empty: the limits held and every message was decided)."""
    problems: list[str] = []
    chats = model.chats()
    sent = [tokens_of(body) for body in chats]
    answers = [len(answer_of(n)) // 4 for n in range(1, len(chats) + 1)]
    batches = [marks_of(body) for body in chats]
    summary = "; ".join(
        f"#{n}: {tokens:,} tokens, {len(marks)} flood messages" + (f" ({marks[0]}..{marks[-1]})" if marks else "")
        for n, (tokens, marks) in enumerate(zip(sent, batches, strict=True), start=1)
    )
    if max(sent) > BUDGET:
        problems.append(f"a request sent {max(sent):,} tokens, more than the day's {BUDGET:,}: {summary}")
    if sum(sent) + sum(answers) > BUDGET + max(answers):
        problems.append(
            f"the requests of the day took {sum(sent) + sum(answers):,} tokens, answers included, more than the "
            f"day's {BUDGET:,} (plus one answer): {summary}"
        )
    if max(len(marks) for marks in batches) > BATCH:
        problems.append(f"a request asked about more than {BATCH} messages (REDIS_BATCH_SIZE): {summary}")
    posted = [m.text for m in telegram.sent if m.chat_id == FLOODER]
    answered = answered_marks(telegram, model)
    for n, marks in enumerate(batches, start=1):
        if marks and n in model.answered and f"ok #{n}" not in posted:
            problems.append(f"request #{n} (messages {marks[0]}..{marks[-1]}) was not answered in the chat: {posted}")
    for n, body in enumerate(chats, start=1):
        leaked = sorted({int(m) for m in _MARK.findall(json.dumps(body["messages"]))} - answered)
        if leaked:
            problems.append(
                f"request #{n} ({sent[n - 1]:,} tokens, system prompt {str(body['messages'][0]['content'])[:60]!r}...) "
                f"carries {len(leaked)} messages that were never answered ({leaked[0]}..{leaked[-1]}): the model "
                f"reads what the limits refused"
            )
    unanswered = MESSAGES - len(answered)
    if sum(refused.values()) != unanswered:
        problems.append(
            f"{len(answered)} messages answered, {unanswered} not, but the limits refused {sum(refused.values()):g} "
            f"inputs (bots_limited_total by limit: {refused}): each message is answered or refused"
        )
    for limit, count in refused.items():
        if count and not any(_notice(text) and text_of_limit(text) == limit for text in posted):
            problems.append(f"{count:g} inputs refused by {limit}, but no notice of it in the chat: {posted}")
    if unanswered and not any(_notice(text) for text in posted):
        problems.append(f"{unanswered} messages not answered and no notice in the chat: {posted}")
    return problems


def _notice(text: str) -> bool:
    """Whether ``text`` is a limit's notice: "Sorry, ...", or for a burst refused at once (the first messages over
    the limit arrived together) "I did not read 20 of the messages you just sent. Sorry, ..."."""
    return re.sub(r"\AI did not read \d+ of the messages you just sent\. ", "", text).startswith("Sorry")


def text_of_limit(text: str) -> str | None:
    """The limit whose notice ``text`` is (None: not a limit's notice)."""
    return next((limit for limit, phrases in NOTICES.items() if any(p in text for p in phrases)), None)


async def another_user_is_answered(telegram: FakeTelegramServer, model: SlowModel) -> None:
    telegram.user_says("hello from someone else", user_id=OTHER)
    replies = await telegram.wait_replies(1, chat_id=OTHER, timeout=DEADLINE)
    assert replies[0].text.startswith("ok #"), [m.text for m in replies]
    asked = [body for body in model.chats() if "hello from someone else" in str(body["messages"][-1]["content"])]
    assert len(asked) == 1


@pytest.mark.parametrize("deployment", ["one process", "fleet", "fleet with a history"])
async def test_a_flood_keeps_to_the_day_limits_and_every_message_is_answered_or_told(
    deployment: str, tmp_path: Path, request: pytest.FixtureRequest, processes: list[Process]
) -> None:
    async with SlowModel() as model, FakeTelegramServer() as telegram:
        env = settings(telegram, model)
        if deployment.startswith("fleet"):
            redis: RedisServer = request.getfixturevalue("redis_server")
            env["REDIS_URL"] = redis.url
            if deployment == "fleet with a history":  # PostgreSQL: the workers keep and summarize the history
                env["DATABASE_URL"] = request.getfixturevalue("database_url")
            gateway, workers = await start_fleet(tmp_path, env, processes, workers=2)
            running = [gateway, *workers]
        else:
            bot = Process("run", env_for(tmp_path, **env), tmp_path)
            processes.append(bot)
            await bot.start()
            await bot.wait_for("ready with telegram")
            running = [bot]
        async with draining(running):
            await flood(telegram, model)
            problems = problems_of(telegram, model, await decided(telegram, model, running))
            await another_user_is_answered(telegram, model)
        await stop_all(*running)
        assert telegram.unknown_calls == []
    for process in running:
        errors = [line for line in process.lines if line.get("level") in ("ERROR", "CRITICAL")]
        if errors:
            problems.append(f"bots {process.command} logged errors: {errors}")
    assert not problems, "\n".join(problems)
