"""End to end: answers shown while they are written (posted, then edited; drafts in private chats), through
the real python-telegram-bot client, the fake Bot API and a scripted model that streams slowly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from core import ModelError, ModelRequest, ScriptedModel
from extensions.telegram.definitions import MODEL_DOWN
from extensions.telegram.live import pieces
from extensions.telegram.render import render_html, visible_text
from tests.fakes.telegram_server import FakeTelegramServer, SentMessage

from .conftest import RunWatcher, StartBot, answer

INTERVAL = 0.1
"""TELEGRAM_STREAM_INTERVAL in these tests."""
GROUP = -100200300
ANSWER = (
    "Streaming works like this: the first words are posted at once, then the message is edited "
    "while the model writes, and the end is **exact**."
)
SHOWN = visible_text(render_html(ANSWER))


def slow(text: str, *, chunk_size: int = 4, delay: float = 0.01) -> ScriptedModel:
    """A model that writes ``text`` a few characters at a time, a little slower than a person reads."""
    return ScriptedModel([answer(text)], chunk_size=chunk_size, delay=delay, repeat_last=True)


class Gated(ScriptedModel):
    """``slow``, held at a third and at two thirds of its answer until the chat has seen one, then two updates more
    (``updates``) since it started writing: the user sees the answer grow however slow the round trips are (the
    gate gives up after 30 s: the test's assertion says what was missed)."""

    def __init__(self, text: str, seen: Callable[[], int], *, chunk_size: int = 4, delay: float = 0.01) -> None:
        super().__init__([answer(text)], chunk_size=chunk_size, delay=delay, repeat_last=True)
        self.length = len(answer(text))
        self.seen = seen

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        base, written, gate = self.seen(), 0, 1
        async for chunk in super().stream(request):
            if gate <= 2 and written >= self.length * gate / 3:
                deadline = time.monotonic() + 30
                while self.seen() < base + gate and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                gate += 1
            written += len(chunk)
            yield chunk


def updates(server: FakeTelegramServer) -> Callable[[], int]:
    """How many messages, edits and drafts the fake Bot API took so far."""
    methods = ("sendMessage", "editMessageText", "sendMessageDraft")
    return lambda: sum(c.status == 200 for m in methods for c in server.calls_of(m))


def update_times(message: SentMessage) -> list[float]:
    return [message.posted_at, *message.edited_at]


def assert_rate_bound(message: SentMessage) -> None:
    """At most one update per interval while streaming, plus the final edit (an upper bound only)."""
    times = update_times(message)
    assert len(times) <= (times[-1] - times[0]) / INTERVAL + 2, (len(times), times[-1] - times[0])


def visible(server: FakeTelegramServer) -> list[SentMessage]:
    return [m for m in server.sent if not m.deleted]


async def test_the_answer_appears_as_it_is_written(server: FakeTelegramServer, start_bot: StartBot) -> None:
    agent = await start_bot(Gated(ANSWER, updates(server)), stream_interval=INTERVAL)
    runs = RunWatcher(agent)
    update = server.user_says("how does streaming work?")
    await runs.wait(1)
    [reply] = server.sent
    assert reply.reply_to == update["message"]["message_id"]
    assert (reply.text, reply.raw, reply.parse_mode) == (SHOWN, render_html(ANSWER), "HTML")
    assert len(reply.versions) >= 3, "the user saw at least two versions before the final one"
    for version in reply.edits:
        assert SHOWN.startswith(version.replace("*", "")), version  # partial Markdown shows as written
    assert_rate_bound(reply)
    assert [c.status for c in server.calls_of("editMessageText")] == [200] * len(reply.edits)  # none unchanged
    assert len(server.calls_of("sendMessage")) == 1


async def test_a_long_answer_continues_in_a_second_message(server: FakeTelegramServer, start_bot: StartBot) -> None:
    paragraph = "A paragraph of a long answer, written a few words at a time so the message grows. " * 6
    text = "\n\n".join(f"{n}. {paragraph}" for n in range(10))
    assert len(text) > 4096
    agent = await start_bot(Gated(text, updates(server), chunk_size=120), stream_interval=INTERVAL)
    runs = RunWatcher(agent)
    update = server.user_says("tell me everything")
    await runs.wait(1)
    first, second = visible(server)
    assert [first.text, second.text] == [visible_text(render_html(p)).strip() for p in pieces(text)]
    assert first.reply_to == update["message"]["message_id"] and second.reply_to is None
    assert len(first.versions) >= 2, "the first message grew while the answer was written"
    assert_rate_bound(first)
    assert_rate_bound(second)


async def test_a_429_on_an_edit_is_waited_out_and_the_end_is_exact(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.fail("editMessageText", status=429, retry_after=1, times=1)
    agent = await start_bot(slow(ANSWER), stream_interval=INTERVAL)
    runs = RunWatcher(agent)
    server.user_says("hello")
    await runs.wait(1)
    [reply] = server.sent
    assert reply.text == SHOWN
    assert 429 in [c.status for c in server.calls_of("editMessageText")]


async def test_edits_refused_to_the_end_still_deliver_the_exact_text(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.fail("editMessageText", status=429, retry_after=1, times=1000)
    agent = await start_bot(slow(ANSWER), stream_interval=INTERVAL, max_retries=0)
    runs = RunWatcher(agent)
    server.user_says("hello")
    await runs.wait(1)
    [reply] = visible(server)
    assert reply.text == SHOWN and reply.edits == []  # the final text came as a new message
    assert [m.deleted for m in server.sent] == [True, False]  # and the stale one was removed


async def test_an_edit_telegram_cannot_parse_is_sent_as_plain_text(
    server: FakeTelegramServer, start_bot: StartBot
) -> None:
    server.fail(
        "editMessageText",
        status=400,
        description='Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0',
        when=lambda params: params.get("parse_mode") == "HTML",
    )
    agent = await start_bot(slow(ANSWER), stream_interval=INTERVAL)
    runs = RunWatcher(agent)
    server.user_says("hello")
    await runs.wait(1)
    [reply] = server.sent
    assert (reply.text, reply.parse_mode) == (SHOWN, "HTML")
    plain = [c for c in server.calls_of("editMessageText") if c.status == 200 and c.params.get("parse_mode") is None]
    assert plain, "the refused edit was made again as plain text"


async def test_with_streaming_off_the_answer_is_posted_once(server: FakeTelegramServer, start_bot: StartBot) -> None:
    agent = await start_bot(slow(ANSWER), stream_interval=INTERVAL, stream_replies=False)
    runs = RunWatcher(agent)
    server.user_says("hello")
    await runs.wait(1)
    [reply] = server.sent
    assert reply.text == SHOWN and reply.edits == []
    assert len(server.calls_of("sendMessage")) == 1 and server.calls_of("editMessageText") == []


async def test_private_chats_can_stream_drafts(server: FakeTelegramServer, start_bot: StartBot) -> None:
    agent = await start_bot(
        Gated(ANSWER, updates(server)), stream_interval=INTERVAL, stream_drafts=True, reply_policy="always"
    )
    runs = RunWatcher(agent)
    update = server.user_says("hello")
    await runs.wait(1)
    [reply] = server.sent
    assert (reply.text, reply.edits) == (SHOWN, [])  # posted once, complete
    assert reply.reply_to == update["message"]["message_id"]
    drafts = [d for d in server.drafts if d[0] == 1001]
    assert len(drafts) >= 2 and len({d[1] for d in drafts}) == 1, "one draft, updated as the answer grew"
    assert server.calls_of("editMessageText") == []
    server.user_says("in a group", chat_id=GROUP, kind="supergroup")
    await runs.wait(2)
    [group_reply] = [m for m in server.sent if m.chat_id == GROUP]
    assert len(group_reply.versions) >= 2 and group_reply.text == SHOWN  # no drafts in groups: edits


async def test_a_bot_api_without_drafts_falls_back_to_edits(server: FakeTelegramServer, start_bot: StartBot) -> None:
    server.fail("sendMessageDraft", status=404, description="Not Found", times=1000)
    agent = await start_bot(Gated(ANSWER, updates(server)), stream_interval=INTERVAL, stream_drafts=True)
    runs = RunWatcher(agent)
    server.user_says("hello")
    await runs.wait(1)
    [reply] = server.sent
    assert reply.text == SHOWN and len(reply.versions) >= 2
    assert len(server.calls_of("sendMessageDraft")) == 1  # tried once, then posting and editing


class FailsMidway:
    """Writes the start of an answer slowly, then the model connection breaks."""

    name = "fails-midway"
    model = ""
    vision = False
    last_usage = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        for chunk in ('<response><output type="telegram:message">', "The answer st", "arts like this and"):
            yield chunk
            await asyncio.sleep(INTERVAL * 1.5)
        raise ModelError("the model server went away")


async def test_an_answer_cut_by_a_failed_run_is_marked(server: FakeTelegramServer, start_bot: StartBot) -> None:
    agent = await start_bot(FailsMidway(), stream_interval=INTERVAL)
    runs = RunWatcher(agent)
    server.user_says("hello")
    await runs.wait(1)
    partial, notice = server.sent
    assert partial.text.startswith("The answer st") and partial.text.endswith(" …")
    assert notice.text == MODEL_DOWN
