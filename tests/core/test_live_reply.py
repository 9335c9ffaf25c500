"""Live replies: few updates, a new message past the limit, and always the exact final text."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core.events import RunEvent, RunEventType
from extensions.chat.split import split_message
from extensions.chat.stream import LiveReplies, LiveReply


def split(limit: int) -> Any:
    return lambda text: split_message(text, limit)


class Sink:
    """Messages by handle, every version of each, and what was requested when."""

    def __init__(self, *, fail_edits: int = 0, post_delay: float = 0.0) -> None:
        self.messages: dict[int, str] = {}
        self.versions: dict[int, list[str]] = {}
        self.deleted: list[int] = []
        self.previews: list[str] = []
        self.times: list[float] = []
        self.posts = 0
        self.fail_edits = fail_edits
        self.post_delay = post_delay
        self.changed = asyncio.Event()

    @property
    def visible(self) -> list[str]:
        """What users see (platforms trim a message's text)."""
        return [self.messages[h].strip() for h in sorted(self.messages) if h not in self.deleted]

    async def post(self, text: str, *, index: int) -> int:
        if self.post_delay:
            await asyncio.sleep(self.post_delay)
        handle = self.posts
        self.posts += 1
        self.messages[handle] = text
        self.versions[handle] = [text]
        self.times.append(time.monotonic())
        self.changed.set()
        return handle

    async def edit(self, handle: Any, text: str) -> None:
        if self.fail_edits:
            self.fail_edits -= 1
            raise RuntimeError("429 Too Many Requests")
        assert self.messages[handle].strip() != text.strip(), "an edit that changes nothing"
        self.messages[handle] = text
        self.versions[handle].append(text)
        self.times.append(time.monotonic())
        self.changed.set()

    async def delete(self, handle: Any) -> None:
        self.deleted.append(handle)

    async def preview(self, text: str) -> None:
        self.previews.append(text)
        self.changed.set()

    async def wait(self, predicate: Any) -> None:
        async with asyncio.timeout(5):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


async def test_streams_with_bounded_updates_and_ends_exact() -> None:
    sink = Sink()
    interval = 0.02
    reply = LiveReply(sink=sink, split=split(100), interval=interval)
    words = [f"word{i} " for i in range(60)]
    started = time.monotonic()
    for w in words:
        reply.feed(w)
        await asyncio.sleep(0.002)
    elapsed = time.monotonic() - started
    final = "".join(words).strip()
    await reply.finish(final)
    assert sink.visible == [c.strip() for c in split_message(final, 100)]
    assert len(sink.visible) > 1, "continued in new messages past the limit"
    assert len(sink.versions[0]) >= 2, "the user saw the first message grow"
    # one flush per interval at most, and a flush touches the open message and at most the one it overflowed
    assert reply.updates <= 2 * (elapsed / interval + 2)


async def test_failed_edits_are_skipped_and_the_final_text_still_arrives() -> None:
    sink = Sink(fail_edits=2)
    reply = LiveReply(sink=sink, split=split(50), interval=0.001)
    reply.feed("hello ")
    await sink.wait(lambda: sink.posts)
    reply.feed("world, this is the rest")
    await asyncio.sleep(0.01)
    await reply.finish("hello world, final")
    assert sink.visible == ["hello world, final"]


async def test_a_final_edit_that_fails_becomes_a_new_message() -> None:
    sink = Sink()
    reply = LiveReply(sink=sink, split=split(50), interval=0.001)
    reply.feed("partial")
    await sink.wait(lambda: sink.posts)
    sink.fail_edits = 1
    assert await reply.finish("the whole answer") == [1]
    assert sink.visible == ["the whole answer"]
    assert sink.deleted == [0]


async def test_a_post_in_flight_is_not_cut_off_nor_repeated() -> None:
    sink = Sink(post_delay=0.05)
    reply = LiveReply(sink=sink, split=split(50), interval=10)
    reply.feed("first words")
    await asyncio.sleep(0.01)  # the post is in flight
    await reply.finish("first words and the end")
    assert sink.posts == 1
    assert sink.visible == ["first words and the end"]


async def test_nothing_is_posted_when_the_answer_arrives_at_once() -> None:
    sink = Sink()
    reply = LiveReply(sink=sink, split=split(50))
    reply.feed("all of it")  # no await in between: the updater never ran
    await reply.finish("all of it")
    assert sink.posts == 1 and sink.versions[0] == ["all of it"]


async def test_a_shorter_final_text_deletes_the_messages_it_no_longer_needs() -> None:
    sink = Sink()
    reply = LiveReply(sink=sink, split=split(20), interval=0.001)
    reply.feed("aaaa bbbb cccc dddd eeee ffff gggg")
    await sink.wait(lambda: sink.posts >= 2)
    await reply.finish("short")
    assert sink.visible == ["short"]


async def test_drafts_show_the_open_message_and_post_only_full_ones() -> None:
    sink = Sink()
    reply = LiveReply(sink=sink, split=split(20), interval=0.001, preview=sink.preview)
    reply.feed("one two ")
    await sink.wait(lambda: sink.previews)
    assert sink.posts == 0
    reply.feed("three four five six seven")
    await sink.wait(lambda: sink.posts >= 1)
    final = "one two three four five six seven eight"
    await reply.finish(final)
    assert sink.visible == [c.strip() for c in split_message(final, 20)]
    assert sink.previews[0].strip() == "one two"


async def test_a_failed_draft_falls_back_to_posting() -> None:
    sink = Sink()

    async def refused(text: str) -> None:
        raise RuntimeError("404 method not found")

    reply = LiveReply(sink=sink, split=split(50), interval=0.001, preview=refused)
    reply.feed("hello")
    await sink.wait(lambda: sink.posts)
    await reply.finish("hello there")
    assert sink.visible == ["hello there"] and reply.preview is None


def text_event(content: Any, *, final: bool = False, index: int = 0, type: str = "chat:message") -> RunEvent:
    return RunEvent(
        type=RunEventType.OUTPUT_TEXT_DONE if final else RunEventType.OUTPUT_TEXT,
        role="assistant",
        is_type_switched=False,
        content=content,
        context_id="ctx",
        output_type=type,
        output_index=index,
        step=1,
    )


async def test_replies_follow_the_run_events() -> None:
    sink = Sink()
    started: list[RunEvent] = []

    def start(event: RunEvent) -> LiveReply:
        started.append(event)
        return LiveReply(sink=sink, split=split(50), interval=0.001)

    replies = LiveReplies(output_type="chat:message", start=start)
    replies.on_event(text_event("other", type="other:thing"))
    replies.on_event(text_event("hel"))
    replies.on_event(text_event("lo"))
    assert len(started) == 1 and len(replies) == 1
    reply = replies.take(("ctx", 1, 0))
    assert reply is not None and reply.text == "hello"
    await reply.finish("hello")
    replies.on_event(text_event("hello", final=True))  # the handler took it: nothing left to do
    assert sink.visible == ["hello"]
    await replies.aclose()


async def test_an_output_its_handler_did_not_finish_is_deleted() -> None:
    sink = Sink()
    replies = LiveReplies(output_type="chat:message", start=lambda e: LiveReply(sink=sink, split=split(50)))
    replies.on_event(text_event("refused text"))
    await sink.wait(lambda: sink.posts)
    replies.on_event(text_event(None, final=True))
    await replies.aclose()
    assert sink.visible == []


async def test_a_failing_start_never_breaks_the_run() -> None:
    def start(event: RunEvent) -> LiveReply:
        raise RuntimeError("no state")

    replies = LiveReplies(output_type="chat:message", start=start)
    replies.on_event(text_event("a"))
    replies.on_event(text_event("b"))
    assert replies.take(("ctx", 1, 0)) is None


async def test_abandoned_replies_are_marked() -> None:
    sink = Sink()
    replies = LiveReplies(
        output_type="chat:message", start=lambda e: LiveReply(sink=sink, split=split(50), interval=0.001)
    )
    replies.on_event(text_event("partial answ"))
    await sink.wait(lambda: sink.posts)
    await replies.abandon_context("ctx")
    assert sink.visible[0].endswith(" …")
    assert replies.get(("ctx", 1, 0)) is None
