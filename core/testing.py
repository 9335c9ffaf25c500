"""What a bot's tests use beside ``ScriptedModel``: a stand-in platform (``StandInChat``) whose reply output keeps
what the bot posted, so an output that posts with ``agent.say`` (as a bot's own output does on Telegram or Discord)
works in a test as on a platform; and a check that fails a test when an output failed (``check_outputs``), which a
run otherwise only marks on the output's log entry (``OutputRef.error``), as the Outputs seed has it; and the new
entries a prompt asks the model about (``updates_of``), for a scripted model that answers what it was just told.

    chat = StandInChat()
    agent = create_agent(model=ScriptedModel(REPLIES), bot=bot, extensions=[chat.extension])
    async with agent:
        await chat.says(agent, "What do you keep?")  # fails the test if an output failed
    assert chat.texts() == ["You keep: buy milk"]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .definitions import Context, Extension, Output, OutputContext, PlatformChat, context, extension, input, output
from .entries import Log, OutputRef

if TYPE_CHECKING:
    from .definition_types import Host

__all__ = ("OutputFailed", "Posted", "StandInChat", "check_outputs", "updates_of")


class OutputFailed(AssertionError):
    """An output of a test's run failed (its handler raised, or it had nothing to post through)."""


def check_outputs(chain: Iterable[Log]) -> None:
    """Fail (``OutputFailed``) when an output of ``chain`` (what ``agent.send`` returns) failed, naming each."""
    failed = [entry for entry in chain if isinstance(entry, OutputRef) and entry.error]
    if failed:
        listed = "; ".join(f"output {entry.type!r} failed: {entry.error}" for entry in failed)
        raise OutputFailed(
            f"{listed}. A test that expects it passes expect_output_errors=True to StandInChat.says, or reads "
            "OutputRef.error from the chain itself"
        )


_COUNT = re.compile(r'<updates count="(\d+)"/>')
_ENTRY = re.compile(r"^<(?:input|output|action_call|action_result|thought|event|error)[ >]", re.M)


def updates_of(prompt: str) -> str:
    """The new entries of a prompt (``core.build_prompt``): the last ``N`` entries of its ``<working-memory>``,
    which ``<updates count="N"/>`` counts, as the prompt shows them, one after the other (empty when there is
    none). ``prompt``: a request's ``prompt``, or the whole text a model server received."""
    counted = _COUNT.findall(prompt)
    if not counted or int(counted[-1]) == 0 or "<working-memory>\n" not in prompt:
        return ""
    memory = prompt.rsplit("<working-memory>\n", 1)[1].split("\n</working-memory>", 1)[0]
    starts = [m.start() for m in _ENTRY.finditer(memory)]
    n = int(counted[-1])
    return memory[starts[-n] :] if len(starts) >= n else memory


@dataclass(frozen=True, kw_only=True)
class Posted:
    """One message the bot posted on the stand-in platform."""

    chat: str
    """The chat it went to."""
    text: str
    """What it said."""


class StandInChat:
    """A platform for tests: conversations ``<name>:chat`` keyed by a chat id (a bot's own context is laid over them
    as over Telegram's), messages in as ``<name>:message``, and the reply output ``<name>:message``, which keeps
    what it posts in ``posted`` (``fail_with``: it raises that instead, to test what the bot does then)."""

    def __init__(self, name: str = "test") -> None:
        self.name = name
        """The platform's name, the prefix of its context, input and output."""
        self.posted: list[Posted] = []
        """What the bot posted, in order."""
        self.fail_with: Exception | None = None
        """When set, posting raises it (a platform down)."""
        self.context: Context[str] = context(
            type=f"{name}:chat",
            schema=str,
            key=lambda chat: chat,
            description="A conversation with one person, in a test",
            instructions=f'Answer with <output type="{name}:message">.',
            conversation=True,
            chat_of=lambda chat: PlatformChat(platform=name, chat_id=chat, user_id=chat, args=chat),
        )
        """A conversation, keyed by its chat id."""
        self.output: Output[str, Any] = output(
            type=f"{name}:message",
            description="Sends a message to the person you are talking with",
            schema=str,
            handler=self._post,
            context=self.context,
        )
        """The reply output, as each platform has one (``agent.say`` posts through it)."""
        self.extension: Extension = extension(
            name=name,
            contexts=[self.context],
            inputs=[input(type=f"{name}:message", schema=str, context=self.context)],
            outputs=[self.output],
        )
        """What ``create_agent(extensions=[...])`` takes."""

    def _post(self, text: str, ctx: OutputContext[Any], agent: Host) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.posted.append(Posted(chat=str(ctx.state.platform_args), text=text))

    async def says(self, agent: Host, text: str, *, chat: str = "1", expect_output_errors: bool = False) -> list[Log]:
        """The person in ``chat`` says ``text``; the run's chain once it is answered. Fails the test
        (``OutputFailed``) when an output failed, unless ``expect_output_errors``."""
        chain: list[Log] = await agent.send(self.context, chat, {"type": f"{self.name}:message", "data": text})
        if not expect_output_errors:
            check_outputs(chain)
        return chain

    def texts(self, chat: str = "1") -> list[str]:
        """What the bot posted in ``chat``, in order."""
        return [p.text for p in self.posted if p.chat == chat]
