"""The Matrix tests' fixtures: a fake homeserver (``tests.fakes.matrix_server``) and the ``bots`` program started as
a process on it (``bots run`` with the ``MATRIX_*`` variables), as an operator runs it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.bots_fleet import Process, env_for
from tests.fakes.matrix_server import FakeHomeserver

ANN, BOB = "@ann:example.org", "@bob:example.org"
"""The people of the tests."""

StartRun = Callable[..., Awaitable[Process]]


@pytest.fixture
async def homeserver() -> AsyncIterator[FakeHomeserver]:
    """A started fake homeserver."""
    async with FakeHomeserver() as fake:
        yield fake


async def syncing(homeserver: FakeHomeserver, *, after: int = 0) -> None:
    """Wait until a bot syncs from a token (its first sync done: it takes messages from now on)."""
    await homeserver.wait_for(lambda: any(s is not None for s in homeserver.syncs[after:]), "the bot's sync")


@pytest.fixture
def start_run(homeserver: FakeHomeserver, processes: list[Process], tmp_path: Path, settings_env: None) -> StartRun:
    """``await start_run(**settings)``: ``bots run`` on the homeserver (the scripted model unless ``settings``
    say otherwise), returned once it syncs."""

    async def start(**settings: str) -> Process:
        env = env_for(tmp_path, **homeserver.settings(), MATRIX_SYNC_TIMEOUT="2", MATRIX_STREAM_INTERVAL="0.2")
        env.update(settings)
        process = Process("run", env, tmp_path)
        processes.append(process)
        await process.start()
        await process.wait_for("Matrix account")
        await syncing(homeserver)
        return process

    return start
