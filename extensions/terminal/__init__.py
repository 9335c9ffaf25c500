"""The terminal chat: context ``cli:session``, input and output ``cli:message``; replies stream as written."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

from core import Agent, Extension, RunEventType, context, extension, input, output

__all__ = ("chat", "cli_extension", "cli_input", "cli_message", "cli_session")

cli_session = context(
    type="cli:session",
    schema=str,
    key=lambda session: session,
    description="A conversation with one person in a terminal.",
    instructions='Answer with <output type="cli:message">. Plain text or Markdown.',
    conversation=True,
)
"""One terminal conversation, keyed by session name."""

cli_message = output(
    type="cli:message",
    description="Sends a message to the person in the terminal.",
    instructions="Use it to answer the person.",
    examples=('<output type="cli:message">Hello! How can I help?</output>',),
    context=cli_session,
)
"""The reply; ``chat`` prints it as it streams, so the handler has nothing left to do."""

cli_input = input(type="cli:message", schema=str, context=cli_session)
"""A line the person typed."""


def cli_extension() -> Extension:
    """The terminal chat extension."""
    return extension(name="cli", contexts=[cli_session], outputs=[cli_message], inputs=[cli_input])


async def _stdin_line() -> str | None:
    line = await asyncio.to_thread(sys.stdin.readline)
    return line.rstrip("\n") if line else None


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


_HELP = "Type a message and press Enter. /reset forgets this conversation, /quit (or Ctrl-D) leaves.\n"


async def chat(
    agent: Agent,
    *,
    session: str = "default",
    read_line: Callable[[], Awaitable[str | None]] = _stdin_line,
    write: Callable[[str], None] = _stdout,
    prompt: str = "you> ",
    bot_name: str = "bot",
) -> None:
    """Talk to ``agent`` in the terminal until EOF or ``/quit``."""
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
        await _exchange(agent, session, text, write=write, bot_name=bot_name)


async def _exchange(agent: Agent, session: str, text: str, *, write: Callable[[str], None], bot_name: str) -> None:
    streamed: dict[int, str] = {}
    answered = False
    said = {"type": "cli:message", "data": text, "params": {"tier": "owner"}}  # the terminal is the operator's
    async for event in agent.stream(cli_session, session, said, reasoning=False):
        if event.type == RunEventType.OUTPUT_TEXT and event.output_type == "cli:message":
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
            elif shown.strip() != final:
                write(f"\n{bot_name}> {final}\n")
            else:
                write("\n")
            answered = True
        elif event.type == RunEventType.TOOL_CALL:
            write(f"  [{event.content['name']}]\n")
        elif event.type == RunEventType.ERROR:
            write(f"[error] {event.content}\n")
            return
    if not answered:
        write(f"{bot_name}> (no answer)\n")
