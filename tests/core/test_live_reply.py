"""Live replies: few edits, a new message past the limit, and always the exact final text."""

from __future__ import annotations

import asyncio
from typing import Any

from extensions.chat.stream import LiveReplies, LiveReply


class Sink:
    def __init__(self, *, fail_edits: bool = False) -> None:
        self.messages: list[str] = []
        self.versions: list[list[str]] = []
        self.fail_edits = fail_edits

    async def post(self, text: str, *, first: bool) -> int:
        self.messages.append(text)
        self.versions.append([text])
        return len(self.messages) - 1

    async def edit(self, handle: Any, text: str) -> None:
        if self.fail_edits:
            raise RuntimeError("429 Too Many Requests")
        self.messages[handle] = text
        self.versions[handle].append(text)


async def test_streams_with_bounded_edits_and_ends_exact() -> None:
    sink = Sink()
    reply = LiveReply(sink=sink, limit=100, interval=0.02)
    words = [f"word{i} " for i in range(60)]
    for w in words:
        reply.feed(w)
        await asyncio.sleep(0.002)
    final = "".join(words).strip()
    await reply.finish(final)
    assert "\n".join(sink.messages).replace("\n", " ").split() == final.split()
    assert all(len(m) <= 100 for m in sink.messages)
    assert len(sink.messages) > 1, "continued in new messages past the limit"
    assert len(sink.versions[0]) >= 2, "the user saw the first message grow"


async def test_failed_edits_are_skipped_and_the_final_text_still_arrives() -> None:
    sink = Sink(fail_edits=True)
    reply = LiveReply(sink=sink, limit=50, interval=0.001)
    reply.feed("hello ")
    await asyncio.sleep(0.01)
    reply.feed("world, this is the rest")
    await asyncio.sleep(0.01)
    await reply.finish("hello world, final")
    assert sink.messages[-1] == "hello world, final"


async def test_abandoned_replies_are_marked() -> None:
    sink = Sink()
    replies = LiveReplies()
    reply = replies.start(("ctx", 1, 0), LiveReply(sink=sink, limit=50, interval=0.001))
    reply.feed("partial answ")
    while not sink.messages:
        await asyncio.sleep(0.001)
    await replies.abandon_context("ctx")
    assert sink.messages[0].endswith(" …")
    assert replies.get(("ctx", 1, 0)) is None
