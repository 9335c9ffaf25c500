"""``bots new NAME`` as a new author meets it: the folder it makes, that folder's own test run by plain pytest in a
subprocess, then ``bots run`` of it in the terminal (a real subprocess fed a line on stdin, answered by a fake
OpenAI-compatible model on 127.0.0.1 that calls the bot's action); and the folders and names it refuses."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bots.cli import main
from bots.scaffold import FILES
from tests.bots.test_cli import BOTS, DEADLINE, STOP_TIMEOUT, clean_env
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer

CALL = '<response><action_call name="add_todo">{"item": "milk"}</action_call></response>'
ADDED = "Added milk to your list."


def answer(platform: str) -> Reply:
    """The model's second reply: the platform's own reply output, which the bot does not define."""
    return Reply(chunks=(f'<response><output type="{platform}:message">{ADDED}</output></response>',))


def fake_model(url: str) -> dict[str, str]:
    return {"LLM_PROVIDER": "openai", "LLM_BASE_URL": url, "LLM_API_KEY": "sk-test", "LLM_MODEL": "fake"}


def ran_add_todo(model: FakeOpenAIServer) -> None:
    """The model was asked twice: with the bot's instructions, action and empty list, then with the list the
    action wrote to the chat's memory and the action's result."""
    assert len(model.requests) == 2
    first, second = (json.dumps(request.body) for request in model.requests)
    assert (
        "You keep a todo list for the person you talk with" in first
        and "add_todo" in first
        and "remind me to buy milk" in first
    )
    assert "Todo list: (empty)" in first
    assert "Todo list: milk" in second, "the action wrote the chat's memory, which the next step renders"
    assert '\\"todos\\": 1' in second


def test_new_makes_a_bot_whose_own_test_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "mybot"
    assert main(["new", str(folder)]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    for name in FILES:
        assert f"  {name}\n" in printed
    assert f"bots run {folder}" in printed and f"pytest {folder}" in printed and "TELEGRAM_TOKEN=" in printed
    assert 'name="mybot"' in (folder / "bot.py").read_text()
    example = (folder / ".env.example").read_text()
    assert all(line.startswith("#") for line in example.splitlines() if line), "nothing is set by the example"
    for var in ("TELEGRAM_TOKEN=", "DISCORD_TOKEN=", "LLM_PROVIDER=", "LLM_BASE_URL=", "LLM_API_KEY="):
        assert var in example
    readme = (folder / "README.md").read_text()
    assert "bots run mybot" in readme and "TELEGRAM_TOKEN" in readme and "pytest mybot" in readme

    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(tmp_path),
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


async def test_run_of_a_new_bot_answers_in_the_terminal_and_runs_its_action(tmp_path: Path) -> None:
    assert main(["new", str(tmp_path / "mybot")]) == 0
    model = FakeOpenAIServer(replies=[Reply(chunks=(CALL,)), answer("cli")])
    async with model:
        env = clean_env(tmp_path, WEB_PORT="0", **fake_model(model.url))  # no web chat beside it: no port to share
        terminal, typed = pty.openpty()  # the terminal chat opens on a terminal only
        os.write(terminal, b"remind me to buy milk\n\x04")  # one line, then Ctrl-D (EOF)
        try:
            proc = await asyncio.create_subprocess_exec(
                *BOTS,
                "run",
                "mybot",
                stdin=typed,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=tmp_path,
                env=env,
            )
            async with asyncio.timeout(DEADLINE):
                out, err = await proc.communicate()
        finally:
            os.close(terminal)
            os.close(typed)
    stdout, stderr = out.decode(), err.decode()
    assert proc.returncode == 0, stdout + stderr
    assert f"> {ADDED}" in stdout
    ran_add_todo(model)


async def answered_on_telegram(folder: Path, *app: str) -> FakeOpenAIServer:
    """``bots run APP`` in ``folder`` with a token, against the fake Telegram server and a fake model: a message
    from a user is answered (the model calls ``add_todo``, then answers through ``telegram:message``), then SIGTERM
    stops it cleanly. The fake model, with the requests it received."""
    model = FakeOpenAIServer(replies=[Reply(chunks=(CALL,)), answer("telegram")])
    async with model, FakeTelegramServer() as telegram:
        env = clean_env(
            folder,
            WEB_PORT="0",
            TELEGRAM_TOKEN=telegram.token,
            TELEGRAM_API_URL=telegram.api_url,
            TELEGRAM_POLL_TIMEOUT="10",
            **fake_model(model.url),
        )
        with (folder / "stderr.txt").open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                *BOTS, "run", *app, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, cwd=folder, env=env
            )
            try:
                telegram.user_says("remind me to buy milk")
                await telegram.wait_for(lambda: any(m.text == ADDED for m in telegram.sent), timeout=DEADLINE)
                proc.send_signal(signal.SIGTERM)
                async with asyncio.timeout(DEADLINE + STOP_TIMEOUT):
                    code = await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
    assert code == 0, (folder / "stderr.txt").read_text()
    return model


async def test_run_of_a_new_bot_with_telegram_token_answers_on_telegram(tmp_path: Path) -> None:
    assert main(["new", str(tmp_path / "mybot")]) == 0
    ran_add_todo(await answered_on_telegram(tmp_path, "mybot"))


def test_new_refuses_a_folder_that_is_not_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "mybot"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert main(["new", str(folder)]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert f"{folder} already exists and is not empty" in said.err
    assert [p.name for p in folder.iterdir()] == ["notes.txt"] and (folder / "notes.txt").read_text() == "mine"


def test_new_fills_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "mybot").mkdir()
    assert main(["new", str(tmp_path / "mybot")]) == 0
    assert (tmp_path / "mybot" / "bot.py").is_file()


@pytest.mark.parametrize("name", ["my bot", "1bot", "my.bot", "_bot", ".", "..", "bot$"])
def test_new_refuses_a_name_that_is_not_a_plain_folder_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["new", name]) == 2
    assert "starts with a letter and holds only letters, digits" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_new_refuses_a_file_in_the_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mybot").write_text("a file")
    assert main(["new", str(tmp_path / "mybot")]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
