"""The conformance suite's Matrix driver: the fake homeserver (``tests.fakes.matrix_server``), matrix-nio's real
client in the bot. The DM is a room of Alice and the bot, the group a room of Alice, Bob and the bot; commands are
written ``!name``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.definitions import Context
from tests.fakes.matrix_server import FakeHomeserver

from .drivers import DEADLINE, Driver, Message

__all__ = ("MatrixDriver",)

ALICE, BOB = "@alice:example.org", "@bob:example.org"


class MatrixDriver(Driver):
    name = "matrix"
    output = "matrix:message"

    def __init__(self) -> None:
        self.fake = FakeHomeserver()
        self.dm = ""
        self.group = ""

    async def start(self) -> None:
        await self.fake.__aenter__()
        self.dm = self.fake.room("Alice", {ALICE: "Alice"})
        self.group = self.fake.room("Team", {ALICE: "Alice", BOB: "Bob"})

    async def close(self) -> None:
        await self.fake.__aexit__(None, None, None)

    def settings(self, **overrides: Any) -> dict[str, Any]:
        return {
            "homeserver": self.fake.url,
            "user_id": self.fake.bot,
            "access_token": self.fake.token,
            "stream_interval": 0.05,
            "sync_timeout": 1,
            **overrides,
        }

    async def ready(self) -> None:
        await self.wait(lambda: any(since is not None for since in self.fake.syncs))

    def _room(self, where: str) -> str:
        return self.dm if where == "dm" else self.group

    async def say(self, text: str, *, where: str = "dm", mention: bool = False) -> Message:
        event_id = self.fake.say(self._room(where), ALICE, text, mention=mention)
        return Message(where=where, raw=event_id)

    async def send_picture(self, data: bytes, caption: str) -> Message:
        event_id = self.fake.picture(self.dm, ALICE, data, name="picture.png", caption=caption)
        return Message(where="dm", raw=event_id)

    def replies(self, where: str = "dm") -> list[str]:
        return self.fake.shown(self._room(where))

    def versions(self, where: str = "dm") -> list[list[str]]:
        return self.fake.versions(self._room(where))

    def pictures_posted(self) -> list[bytes]:
        return [data for data, _mime in self.fake.uploaded()]

    def files_fetched(self) -> int:
        return self.fake.downloads()

    async def command(self, name: str, arg: str = "", *, where: str = "dm") -> str:
        before = len(self.replies(where))
        await self.say(f"!{name} {arg}".strip(), where=where)
        await self.wait(lambda: len(self.replies(where)) > before)
        return self.replies(where)[before]

    async def delete(self, message: Message) -> None:
        self.fake.redact(self._room(message.where), ALICE, str(message.raw))

    def conversation(self, where: str = "dm") -> tuple[Context, Any]:
        from extensions.matrix import RoomArgs, matrix_room

        return matrix_room, RoomArgs(room_id=self._room(where))

    def operator_channel(self) -> str:
        return f"matrix:{self.group}"

    def fleet_env(self) -> dict[str, str]:
        return {**self.fake.settings(), "MATRIX_SYNC_TIMEOUT": "1"}

    async def wait(self, predicate: Callable[[], bool], *, timeout: float = DEADLINE) -> None:
        await self.fake.wait_for(predicate, timeout=timeout)
