"""The terminal chat: context ``cli:session``, input and output ``cli:message``; replies stream as written. Ctrl-C
while an answer is written stops the answer (``StopKey``), not the program; at the prompt it still leaves."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import (
    Agent,
    ContextState,
    Extension,
    OutputContext,
    PlatformChat,
    RunEventType,
    Setup,
    context,
    extension,
    input,
    output,
)
from core.media import Outgoing, media_posters

__all__ = ("StopKey", "chat", "cli_extension", "cli_input", "cli_message", "cli_session", "typed")

cli_session = context(
    type="cli:session",
    schema=str,
    key=lambda session: session,
    description="A conversation with one person in a terminal.",
    instructions='Answer with <output type="cli:message">. Plain text or Markdown.',
    conversation=True,
    chat_of=lambda session: PlatformChat(platform="cli", chat_id=session, user_id=session, args=session),
    example_args="default",  # (the session the terminal chat opens)
)
"""One terminal conversation, keyed by session name."""


@dataclass
class _Screen:
    """A terminal chat ``chat`` holds open: how it writes, and whether a line typed there is being answered."""

    write: Callable[[str], None]
    bot_name: str
    prompt: str
    answering: bool = False


_SCREENS: dict[str, _Screen] = {}
"""The terminal chats of this process, by session."""


def _unasked(text: str, ctx: OutputContext[Any], agent: Any) -> None:
    """An answer no typed line is waiting for (a reminder's, an event's), printed above the prompt; the answer to
    a typed line is printed as it streams (``_exchange``). Before, a reminder that fired in the terminal chat
    answered into nothing."""
    screen = _SCREENS.get(str(ctx.state.args))
    if screen is not None and not screen.answering:
        screen.write(f"\n{screen.bot_name}> {text}\n{screen.prompt}")


cli_message = output(
    type="cli:message",
    description="Sends a message to the person in the terminal.",
    instructions="Use it to answer the person.",
    examples=('<output type="cli:message">Hello! How can I help?</output>',),
    context=cli_session,
    handler=_unasked,
)
"""The reply; ``chat`` prints the answer to a typed line as it streams, the handler any other (``_unasked``)."""

cli_input = input(type="cli:message", schema=str, context=cli_session)
"""A line the person typed."""


class _SavedMedia:
    """The terminal's way of posting a picture or a spoken reply: a file saved in ``folder``, named by its path."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def post_media(self, state: ContextState[Any], item: Outgoing) -> str:
        path = self.folder / f"{item.kind.value}-{secrets.token_hex(4)}{Path(item.name).suffix}"

        def save() -> None:  # the user's alone, like the rest of the data folder
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(item.data)

        await asyncio.to_thread(save)
        _stdout(f"\n({item.kind.value} saved: {path})\n")
        return f"saved as {path}"


def cli_extension(*, media_dir: Path | str = Path("data") / "media") -> Extension:
    """The terminal chat extension; pictures the bot makes and spoken replies are saved in ``media_dir`` (the
    terminal shows their path; ``bots chat`` passes ``BOT_DATA_DIR``/media), readable by the user alone."""
    poster = _SavedMedia(Path(media_dir))

    def install(agent: Setup) -> None:
        media_posters(agent).add(cli_session.type, poster, reply_output=cli_message.type)

    return extension(name="cli", install=install, contexts=[cli_session], outputs=[cli_message], inputs=[cli_input])


async def _stdin_line() -> str | None:
    line = await asyncio.to_thread(sys.stdin.readline)
    return line.rstrip("\n") if line else None


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


_HELP = (
    "Type a message and press Enter. Ctrl-C (or /stop) stops an answer being written, /reset forgets this "
    "conversation, /quit (or Ctrl-D) leaves.\n"
)


class StopKey:
    """Ctrl-C in the terminal chat: whoever receives the signal (``bots chat``) calls ``press``. While an answer is
    written it stops that answer (``Agent.stop_answer``) and returns True; otherwise it returns False and the
    signal does what it did (the program leaves)."""

    def __init__(self) -> None:
        self._stop: Callable[[], bool] | None = None
        self.pressed = False
        """The answer being written was stopped with it."""

    def press(self) -> bool:
        """Ctrl-C was pressed: True when it stopped an answer."""
        if self._stop is None or not self._stop():
            return False
        self.pressed = True
        return True


async def chat(
    agent: Agent,
    *,
    session: str = "default",
    read_line: Callable[[], Awaitable[str | None]] = _stdin_line,
    write: Callable[[str], None] = _stdout,
    prompt: str = "you> ",
    bot_name: str = "bot",
    stop_key: StopKey | None = None,
) -> None:
    """Talk to ``agent`` in the terminal until EOF or ``/quit``; ``stop_key`` stops an answer while it is written
    (its owner presses it on Ctrl-C)."""
    key = stop_key if stop_key is not None else StopKey()
    cid = agent.context_id(cli_session, session)
    screen = _SCREENS[session] = _Screen(write=write, bot_name=bot_name, prompt=prompt)
    try:
        await _talk(agent, session, cid, screen, read_line=read_line, stop_key=key)
    finally:
        if _SCREENS.get(session) is screen:
            del _SCREENS[session]


async def _talk(
    agent: Agent,
    session: str,
    cid: str,
    screen: _Screen,
    *,
    read_line: Callable[[], Awaitable[str | None]],
    stop_key: StopKey,
) -> None:
    write, prompt, key = screen.write, screen.prompt, stop_key
    write(_HELP)
    while True:
        write(prompt)
        line = await read_line()
        if line is None:
            write("\n")
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            return
        if text == "/help":
            write(_HELP)
            continue
        if text == "/reset":
            await agent.reset(cli_session, session)
            write("(conversation forgotten)\n")
            continue
        if text == "/stop":  # (nothing is written while the prompt waits)
            write("(no answer is being written)\n")
            continue
        agent.observe("message_received", cid)  # (bots_messages_received_total{platform="cli"})
        key._stop, key.pressed, screen.answering = (lambda: agent.stop_answer(cid)), False, True
        try:
            await _exchange(agent, session, text, write=write, bot_name=screen.bot_name, stop_key=key)
        finally:
            key._stop, screen.answering = None, False


def typed(session: str, text: str) -> dict[str, Any]:
    """The input of ``text`` typed in the terminal chat's ``session``. The terminal is the operator's: every
    message there is the owner's, which goes without saying in the prompt; its person is the session's
    (``cli:<session>``, as ``chat_of`` says), so the facts they keep are theirs."""
    params = {"tier": "owner", "user_id": session}
    return {"type": "cli:message", "data": text, "params": params, "hidden": list(params)}


async def _exchange(
    agent: Agent, session: str, text: str, *, write: Callable[[str], None], bot_name: str, stop_key: StopKey
) -> None:
    streamed: dict[int, str] = {}
    answered = False
    async for event in agent.stream(cli_session, session, typed(session, text), reasoning=False):
        if (
            event.type in (RunEventType.OUTPUT_TEXT, RunEventType.OUTPUT_TEXT_DONE)
            and event.output_type == "cli:message"
        ):
            index = event.output_index if event.output_index is not None else -1
            if not event.final:
                if index not in streamed:
                    write(f"{bot_name}> ")
                    streamed[index] = ""
                streamed[index] += event.content
                write(event.content)
                continue
            shown = streamed.pop(index, None)
            if event.error is not None:  # refused (bad template, schema); the model gets another try
                if shown is not None:
                    write("  [not delivered]\n")
                continue
            final = str(event.content)
            if shown is None:
                write(f"{bot_name}> {final}\n")
            elif shown.strip() != final and final.startswith(shown.strip()):  # (a stopped answer: its mark)
                write(f"{final[len(shown.strip()) :]}\n")
            elif shown.strip() != final:
                write(f"\n{bot_name}> {final}\n")
            else:
                write("\n")
            answered = True
        elif event.type == RunEventType.TOOL_CALL:
            write(f"  [{event.content['name']}]\n")
        elif event.type == RunEventType.ERROR:
            if stop_key.pressed:  # what was written shows its mark; nothing written: say so
                if streamed:
                    write("\n")
                if not answered:
                    write("(stopped)\n")
                return
            write(f"[error] {event.content}\n")
            return
    if not answered:
        write(f"{bot_name}> (no answer)\n")
