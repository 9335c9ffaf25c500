"""``bots new NAME``: a folder holding a working bot to start from.

The folder has ``bot.py`` (a context keyed by chat, one typed action; each platform brings its reply output),
``test_bot.py`` (the bot driven by a scripted model, run by plain ``pytest``), a ``pytest.ini`` that puts the folder
on ``sys.path``, ``.env.example``, ``.gitignore`` and a short ``README.md``. Out of the box the test passes, ``bots run
NAME`` answers in the terminal with the embedded model, and ``TELEGRAM_TOKEN`` puts the bot on Telegram.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from string import Template

from core.errors import ConfigError

__all__ = ("FILES", "HELP", "add_arguments", "command", "new_bot")

HELP = "create a folder NAME with a bot file, its test, .env.example and a README"
"""The subcommand's help line."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
"""A folder name that is also a plain word on every system and in ``bots run NAME``: no dot (``a.b`` reads as a
module), no space, no separator."""

_BOT = '''\
"""$name: a bot that keeps a todo list for each chat.

    bots run $name    talk to it in the terminal
    pytest $name      its test, with a scripted model

TELEGRAM_TOKEN (or DISCORD_TOKEN) in the environment puts it on that platform.
"""

from __future__ import annotations

from typing import Any

from core import ActionContext, Bot, ContextState, Host, LoopGuard, action, context
from pydantic import BaseModel, Field


class Chat(BaseModel):
    """What names one conversation when the bot is driven directly, as test_bot.py
    does. On Telegram, Discord, the web chat and the terminal, each chat is an
    instance of the context below laid over the platform's own, keyed by its chat,
    and state.args is still a Chat: `chat` gets the platform's chat id, as text."""

    chat: str = "default"


class Todo(BaseModel):
    """The arguments of add_todo: the model writes them, they are checked against
    this schema, and the descriptions are part of the prompt."""

    item: str = Field(description="What to do")


def show(state: ContextState[Any]) -> str:
    """What the model sees of the chat, on every step."""
    return "Todo list: " + (", ".join(state.memory["todos"]) or "(empty)")


# The bot's conversation: one instance per chat, each with its own memory.
todos = context(
    type="todo",
    schema=Chat,
    key=lambda chat: chat.chat,  # which instance a chat is
    create=lambda state: {"todos": []},  # a new chat's memory (JSON, saved)
    render=show,
)


def add_todo(args: Todo, ctx: ActionContext, agent: Host) -> dict[str, int]:
    """The action: its checked arguments, the call's context (ctx.memory is the
    chat's memory) and the agent. What it returns, the model sees next step."""
    ctx.memory["todos"].append(args.item)
    return {"todos": len(ctx.memory["todos"])}


# The bot, which `bots run` loads by this name. It defines no reply output: each
# platform brings its own (telegram:message, discord:message, web:message,
# cli:message), and the model answers with it.
bot = Bot(
    name="$name",
    context=todos,
    instructions=(
        "You keep a todo list for the person you talk with. When they ask you "
        "to add something to it, add it with add_todo."
    ),
    actions=[
        action(
            name="add_todo",
            description="Add an item to the todo list",
            schema=Todo,
            handler=add_todo,
        )
    ],
    # features, each one line: LoopGuard refuses a call or reply the model repeats
    # in one run (small models do); bots.plugins has the deployment's (limits,
    # usage, trust...), plugins.standard() all of the built-in assistant's
    plugins=[LoopGuard()],
)
'''

_TEST = '''\
"""The bot's test. A scripted model answers as an LLM would, in the framework's XML
protocol, so the test needs neither a model nor a network. Run it with `pytest` in
this folder, or `pytest $name` from the one above."""

from __future__ import annotations

import asyncio
from typing import Any

from core import ActionCall, ActionResult, Log, ScriptedModel, create_agent

from bot import Chat, bot, todos

# One reply per model call: the model calls add_todo, then, shown the result, it
# has nothing more to do. (On a platform it would answer the user next, with the
# platform's reply: <output type="cli:message">Added milk.</output>.)
REPLIES = [
    '<response><action_call name="add_todo">{"item": "milk"}</action_call></response>',
    "<response><reasoning>milk is on the list</reasoning></response>",
]


async def talk(model: ScriptedModel, text: str) -> tuple[list[Log], Any]:
    """Send text to chat "1"; return the run's logs and the chat's memory after it."""
    agent = create_agent(model=model, bot=bot)
    chat = Chat(chat="1")
    async with agent:
        said = {"type": "todo:message", "data": text}
        chain = await agent.send(todos, chat, said)
        state = await agent.load_state(todos, chat)
    return chain, state.memory


def test_add_todo_is_called_and_remembered() -> None:
    model = ScriptedModel(REPLIES)
    chain, memory = asyncio.run(talk(model, "remind me to buy milk"))
    calls = [log for log in chain if isinstance(log, ActionCall)]
    results = [log for log in chain if isinstance(log, ActionResult)]
    assert [call.name for call in calls] == ["add_todo"]
    assert [(r.error, r.data) for r in results] == [(None, {"todos": 1})]
    assert memory == {"todos": ["milk"]}
    # The model saw the new list in its next step.
    assert "Todo list: milk" in model.requests[1].prompt
'''

_PYTEST_INI = """\
# pytest here, or `pytest $name` from the folder above: this file makes the folder
# pytest's root, and pythonpath puts it on sys.path, so test_bot.py imports bot.py.
[pytest]
pythonpath = .
# test_bot.py runs its own event loop (asyncio.run) and needs no asyncio plugin:
# for `async def` tests, install pytest-asyncio; write `asyncio_mode = auto` instead.
addopts = -p no:asyncio
"""

_ENV_EXAMPLE = """\
# Settings of `bots run $name`, read from the environment or from a .env file in the folder you run `bots`
# from: copy this file to .env there and uncomment what you need. `bots config` shows what is in effect.
# Keep .env out of version control: it holds tokens and keys.

# Platforms. With no token set, `bots run` opens a chat in the terminal.
# A Telegram bot token, from @BotFather:
# TELEGRAM_TOKEN=
# A Discord bot token, from the developer portal (turn on the Message Content intent for the application):
# DISCORD_TOKEN=

# The model. By default the embedded model answers (LLM_PROVIDER=local, the weights `make install` installs).
# An OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, OpenRouter):
# LLM_PROVIDER=openai
# LLM_BASE_URL=http://127.0.0.1:11434/v1
# LLM_MODEL=llama3.2
# LLM_API_KEY=
# Anthropic:
# LLM_PROVIDER=anthropic
# LLM_API_KEY=
"""

_GITIGNORE = """\
.env
data/
__pycache__/
.pytest_cache/
"""

_README = """\
# $name

A bot made by `bots new`: it keeps a todo list for each chat. `bot.py` is the bot, `test_bot.py` its test.

## Run it

From the folder above this one:

    bots run $name

With no platform token set, this is a chat in the terminal, answered by the embedded model (Ctrl-D leaves).
To put the bot on Telegram, give it a bot token from @BotFather:

    TELEGRAM_TOKEN=123456:ABC-your-token bots run $name

`DISCORD_TOKEN` does the same for Discord; with both set, one process serves both. Settings come from the
environment or from a `.env` file in the folder you run `bots` from: `.env.example` lists the usual ones (the
tokens, and `LLM_PROVIDER`, `LLM_BASE_URL`, `LLM_API_KEY` to use another model).

## Test it

    pytest $name

The test drives the bot with a scripted model (exact replies in the framework's XML protocol) and checks that
`add_todo` was called and the chat's memory holds the item.

## Change it

In `bot.py`: the context says what the bot remembers of each chat (`create`) and what the model sees of it
(`render`); actions are what the model can do (a pydantic schema for the arguments, a handler); `instructions`
go in the system prompt. The platform's reply (`telegram:message`, `discord:message`, `cli:message`) is there
without being defined.
"""

FILES = {
    "bot.py": _BOT,
    "test_bot.py": _TEST,
    "pytest.ini": _PYTEST_INI,
    ".env.example": _ENV_EXAMPLE,
    ".gitignore": _GITIGNORE,
    "README.md": _README,
}
"""What ``new_bot`` writes, by file name (``$name`` is the folder's name)."""


def new_bot(name: str, *, where: Path) -> Path:
    """Create the folder ``where / name`` holding a new bot (``FILES``) and return it. A missing ``where`` is
    created; an existing empty folder is filled. Raises ``ConfigError`` for a name that is not a plain folder
    name or a folder that exists and is not empty (nothing is written then)."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"bots new {name!r}: a bot's name starts with a letter and holds only letters, digits, '_' and '-' "
            "(it names the folder, and `bots run NAME` runs it); for example: bots new todo_bot"
        )
    folder = where / name
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"bots new: {folder} exists and is not a folder; choose another name")
    if folder.is_dir() and any(folder.iterdir()):
        raise ConfigError(
            f"bots new: {folder} already exists and is not empty; choose another name or remove the folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, text in FILES.items():
        (folder / file_name).write_text(Template(text).substitute(name=name), encoding="utf-8")
    return folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``bots new``."""
    parser.add_argument("name", metavar="NAME", help="the bot's folder (a path whose last part names the bot)")


def command(args: argparse.Namespace) -> int:
    """``bots new NAME``: create the folder, print what was made and what to run next. Exit code 0, or 2 with
    one line on stderr when the name or the folder is refused."""
    given = Path(args.name)
    try:
        folder = new_bot(given.name, where=given.parent)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"bots new: cannot write {given}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    shown = str(folder)
    print(f"created {shown}/")
    for file_name in FILES:
        print(f"  {file_name}")
    steps = [
        (f"pytest {shown}", "its test, with a scripted model"),
        (f"bots run {shown}", "talk to it in the terminal (the embedded model)"),
        (f"TELEGRAM_TOKEN=<token> bots run {shown}", "put it on Telegram"),
    ]
    width = max(len(line) for line, _ in steps)
    print("next:")
    for line, what in steps:
        print(f"  {line.ljust(width)}  # {what}")
    return 0
