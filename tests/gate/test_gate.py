"""The release gate (issue 47): the installed ``bots`` program, started as a process the way people start it, holds
a conversation on every platform (the fake Telegram, the fake Discord, the web chat over HTTP and once in headless
Chromium, the terminal on a pty), with the embedded default model and its real weights and with a hosted-model fake,
in one process (``bots run``) and as a fleet (``bots gateway`` and two ``bots worker`` on a real redis-server).

The conversation (``tests.gate.harness``): a first message answered, a second that needs the first, and a group
where two people speak, both answered. One started process serves all of a cell's platforms (the embedded model
loads and warms up once). Before the warm-up fix (commit e079dbe) ``bots run`` and ``bots worker`` with a Telegram
or Discord token and the embedded model exited at start: the embedded tests here failed then."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.web.browser import CHROMEDRIVER, CHROMIUM

from .harness import Cell, run_cell

CHATS = ("telegram", "discord", "web")
"""The platforms one started process serves at once (the terminal chat opens only without a platform token)."""
EMBEDDED_BOUND = 1500
"""Seconds an embedded test may take (the model on two busy cores: tens of seconds an answer)."""


def _browser_or_skip() -> None:
    if not CHROMEDRIVER.exists() or not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium and chromium-driver: apt-get install chromium chromium-driver")


async def test_bots_run_with_a_hosted_model_answers_on_telegram_discord_and_the_web_chat(tmp_path: Path) -> None:
    _browser_or_skip()
    results = await run_cell(Cell(platforms=CHATS, browser=True), tmp_path)
    assert set(results) == {*CHATS, "browser"}


async def test_bots_run_with_a_hosted_model_answers_in_the_terminal(tmp_path: Path) -> None:
    results = await run_cell(Cell(platforms=("terminal",)), tmp_path)
    assert set(results["terminal"]) == {"first", "second"}


async def test_a_gateway_and_two_workers_with_a_hosted_model_answer_on_every_platform(tmp_path: Path) -> None:
    results = await run_cell(Cell(platforms=CHATS, deployment="fleet"), tmp_path)
    assert set(results) == set(CHATS)


@pytest.mark.timeout(EMBEDDED_BOUND)
async def test_bots_run_with_the_embedded_model_answers_on_telegram_discord_and_the_web_chat(tmp_path: Path) -> None:
    results = await run_cell(Cell(platforms=CHATS, model="embedded"), tmp_path)
    assert set(results) == set(CHATS)


@pytest.mark.timeout(EMBEDDED_BOUND)
async def test_bots_run_with_the_embedded_model_answers_in_the_terminal(tmp_path: Path) -> None:
    results = await run_cell(Cell(platforms=("terminal",), model="embedded"), tmp_path)
    assert set(results["terminal"]) == {"first", "second"}


@pytest.mark.timeout(EMBEDDED_BOUND)
async def test_a_gateway_and_two_workers_with_the_embedded_model_answer_on_every_platform(tmp_path: Path) -> None:
    results = await run_cell(Cell(platforms=CHATS, model="embedded", deployment="fleet"), tmp_path)
    assert set(results) == set(CHATS)
