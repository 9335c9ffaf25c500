"""Attachments: what a photo costs on top of a text message, through the real python-telegram-bot client and
the fake Bot API on 127.0.0.1 (getFile, then the download), with a zero-delay scripted model that sees images.

Prints, asserting nothing: the bytes and requests fetched per image, the round trip (user sends -> reply
received) of text messages and of photos with their p50 difference (the added latency), and the memory an
attachment keeps once its run is over (its description in working memory; the bytes are dropped with the run),
measured with tracemalloc over many chats, next to the JSON it adds to stored history.

Run: .venv/bin/python bench/media.py [--messages 100] [--photo-kb 150]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, for tests.fakes

import core
from core.media import Attachment, AttachmentKind
from core.media.reader import READER
from extensions.telegram import TelegramSettings, telegram_extension
from tests.fakes.telegram_server import FakeTelegramServer

REPLY = '<response><output type="telegram:message">Nice picture!</output></response>'


def _p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def _round_trips(fake: FakeTelegramServer, count: int, send: object) -> list[float]:
    times: list[float] = []
    for n in range(count):
        before = len(fake.sent)
        started = time.perf_counter()
        send(n)  # type: ignore[operator]
        await fake.wait_replies(before + 1)
        times.append(time.perf_counter() - started)
    return times


async def _bench(messages: int, photo_kb: int) -> None:
    photo = b"\xff\xd8\xff\xe0" + bytes(photo_kb * 1000 - 4)
    fake = FakeTelegramServer()
    await fake.start()
    settings = TelegramSettings(
        token=fake.token, api_url=fake.api_url, poll_timeout=30, rate_limit=0, group_rate_limit=0
    )
    model = core.ScriptedModel(lambda request: REPLY, chunk_size=64, vision=True)
    agent = core.create_agent(model=model, extensions=[telegram_extension(settings)], memory=core.InMemoryStore())
    await agent.start()
    try:
        await _round_trips(fake, 10, lambda n: fake.user_says("warm up"))
        await _round_trips(fake, 10, lambda n: fake.user_sends("photo", photo))
        fetched, calls, downloads = (
            agent.provided(READER).fetched_bytes,
            len(fake.calls_of("getFile")),
            len(fake.downloads),
        )
        text = await _round_trips(fake, messages, lambda n: fake.user_says(f"message {n}"))
        photos = await _round_trips(fake, messages, lambda n: fake.user_sends("photo", photo, caption=f"photo {n}"))
        per_image = (agent.provided(READER).fetched_bytes - fetched) / messages
        requests = (len(fake.calls_of("getFile")) - calls + len(fake.downloads) - downloads) / messages
        images_sent = sum(len(r.images) for r in model.requests[-messages:])
        print(
            f"bytes fetched per image: {per_image:,.0f} (a {photo_kb} KB photo; {requests:.0f} requests: getFile "
            f"and the download; {images_sent}/{messages} reached the model as image parts)"
        )
        text_p50, photo_p50 = _p50(text) * 1000, _p50(photos) * 1000
        print(
            f"round trip p50: text {text_p50:.2f} ms, photo {photo_p50:.2f} ms, "
            f"added by the photo {photo_p50 - text_p50:.2f} ms"
        )

        # memory kept after the run: many chats, each with one photo (working memories stay cached); the
        # scripted model's record of requests (which holds their images) is cleared as it goes
        chats = 200
        model.requests.clear()

        def text_to(n: int) -> None:
            model.requests.clear()
            fake.user_says(f"text {n}", user_id=20_000 + n)

        def photo_to(n: int) -> None:
            model.requests.clear()
            fake.user_sends("photo", photo, user_id=40_000 + n)

        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        await _round_trips(fake, chats, text_to)
        model.requests.clear()
        gc.collect()
        after_text = tracemalloc.get_traced_memory()[0]
        await _round_trips(fake, chats, photo_to)
        model.requests.clear()
        gc.collect()
        after_photos = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        per_text = (after_text - base) / chats
        per_photo = (after_photos - after_text) / chats
        stored = Attachment(
            kind=AttachmentKind.IMAGE,
            name="photo.jpg",
            mime="image/jpeg",
            size=len(photo),
            source="telegram",
            ref="A" * 70,
        )
        print(
            f"memory kept per chat after its run: text message {per_text / 1000:.1f} KB, photo message "
            f"{per_photo / 1000:.1f} KB, so {(per_photo - per_text) / 1000:.1f} KB per attachment (the {photo_kb} KB "
            f"of bytes are held only while the run lasts); an attachment adds "
            f"{len(json.dumps(stored.model_dump(mode='json')))} bytes of JSON to stored history"
        )
    finally:
        await agent.stop()
        await fake.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--photo-kb", type=int, default=150)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_bench(args.messages, args.photo_kb))


if __name__ == "__main__":
    main()
