"""Memory whose shape changes safely, as an author meets it (issue 48): ``make run`` (the built-in assistant, ``bots
run``) in a folder, then ``bots new todo && bots run todo`` in the same folder. The terminal conversation already
exists, with the assistant's memory; the todo bot's ``create`` never ran for it, and its render read
``state.memory["todos"]``: every message printed a ``KeyError`` traceback. Now the memory is brought to the todo
bot's shape (``create``'s keys filled in), the bot answers, and ``bots run`` says which data it uses and which bot
used it last (the assistant's default name, BOT_NAME, is Daydream). Both are the real ``bots`` program in a pty, answered by the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import os
import pty
from pathlib import Path

from bots.cli import main
from tests.bots.test_cli import BOTS, DEADLINE, clean_env
from tests.fakes.openai_server import FakeOpenAIServer, Reply

CALL = '<response><action_call name="add_todo">{"item": "milk"}</action_call></response>'


def said(text: str) -> Reply:
    return Reply(chunks=(f'<response><output type="cli:message">{text}</output></response>',))


async def in_a_terminal(folder: Path, env: dict[str, str], line: str, *app: str) -> tuple[int, str, str]:
    """``bots run [APP]`` in ``folder`` on a pty: one typed line, then Ctrl-D; its exit code, stdout and stderr."""
    terminal, typed = pty.openpty()  # the terminal chat opens on a terminal only
    os.write(terminal, line.encode() + b"\n\x04")
    try:
        proc = await asyncio.create_subprocess_exec(
            *BOTS,
            "run",
            *app,
            stdin=typed,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=folder,
            env=env,
        )
        async with asyncio.timeout(DEADLINE):
            out, err = await proc.communicate()
    finally:
        os.close(terminal)
        os.close(typed)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_make_run_then_bots_new_todo_and_bots_run_todo_in_the_same_folder_answers(tmp_path: Path) -> None:
    model = FakeOpenAIServer(replies=[said("Hello there."), Reply(chunks=(CALL,)), said("Added milk.")])
    async with model:
        env = clean_env(
            tmp_path,
            WEB_PORT="0",
            LLM_PROVIDER="openai",
            LLM_BASE_URL=model.url,
            LLM_API_KEY="sk-test",
            LLM_MODEL="fake",
        )
        code, out, err = await in_a_terminal(tmp_path, env, "hello")  # make run: the built-in assistant
        assert code == 0 and "Hello there." in out, out + err
        assert main(["new", str(tmp_path / "todo")]) == 0
        code, out, err = await in_a_terminal(tmp_path, env, "remind me to buy milk", "todo")
    assert "Traceback" not in out + err and "KeyError" not in out + err, out + err
    assert code == 0 and "Added milk." in out, out + err
    assert "bot 'todo' uses the data folder" in err and "which bot 'Daydream' used last" in err, err
    second = json.dumps(model.requests[-1].body)
    assert "Todo list: milk" in second, "the action added to the memory brought to the todo bot's shape"
