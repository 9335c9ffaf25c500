"""The hosted-model fake of the release gate: an OpenAI-compatible server (``tests.fakes.openai_server``) that
answers every conversation on every platform at once, and whose answers prove what the model was shown.

Each message a gate test sends carries a marker (``marker()``: ``zq`` and six hex digits). The model answers in the
reply output its prompt offers (``telegram:message``, ``discord:message``, ``web:message`` or ``cli:message``)
with ``Heard`` and every marker its prompt holds, in order: a reply holding a marker proves that the request it
answers showed that message, so "the second message's answer holds the first's marker" proves the conversation's
memory, and "the group's replies hold both people's markers" proves both were answered, whatever the busy policy
joined, queued or stopped. ``hold(first, until=second)`` keeps a request that shows ``first`` but not ``second``
waiting until ``release()``, so the second message arrives while the first is being answered (the busy policy's
path)."""

from __future__ import annotations

import asyncio
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.apps.support import prompt_of
from tests.fakes.openai_server import FakeOpenAIServer, Reply

__all__ = ("PLATFORM_OUTPUTS", "EchoModel", "heard", "marker")

PLATFORM_OUTPUTS = ("telegram:message", "discord:message", "web:message", "cli:message")
"""The reply outputs the model tells the platforms apart by."""
_MARKER = re.compile(r"\bzq[0-9a-f]{6}\b")
HOLD_BOUND = 20.0
"""Seconds a held request waits at most for ``release`` (a bound, not a timing assertion)."""


def marker() -> str:
    """A word no prompt holds by chance."""
    return "zq" + secrets.token_hex(3)


def heard(text: str) -> list[str]:
    """The markers in ``text``, in order, each once."""
    return list(dict.fromkeys(_MARKER.findall(text)))


@dataclass
class _Hold:
    first: str
    until: str
    released: asyncio.Event = field(default_factory=asyncio.Event)
    seen: asyncio.Event = field(default_factory=asyncio.Event)


class EchoModel(FakeOpenAIServer):
    """Answers each conversation with the markers its prompt shows (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__(default=Reply(chunks=("Noted.",)))
        self._holds: list[_Hold] = []

    async def __aenter__(self) -> EchoModel:
        await super().__aenter__()
        return self

    def hold(self, first: str, *, until: str) -> None:
        """Keep a request showing ``first`` but not ``until`` waiting until ``release()``."""
        self._holds.append(_Hold(first=first, until=until))

    async def held(self) -> None:
        """Wait until a held request arrived (the first message's run is going on)."""
        async with asyncio.timeout(HOLD_BOUND):
            await asyncio.gather(*(h.seen.wait() for h in self._holds))

    def release(self) -> None:
        for hold in self._holds:
            hold.released.set()

    def prompts(self) -> list[str]:
        """The prompt of every chat completions request, in order."""
        return [prompt_of(r.body) for r in self.requests if r.path.endswith("/chat/completions")]

    def prompt_with(self, word: str) -> str:
        """The first prompt that shows ``word``."""
        found = [p for p in self.prompts() if word in p]
        assert found, f"no request showed {word!r}"
        return found[0]

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        prompt = prompt_of(body)
        offered = [o for o in PLATFORM_OUTPUTS if f'type="{o}"' in prompt or f"<type>{o}</type>" in prompt]
        if not offered:
            offered = [o for o in PLATFORM_OUTPUTS if o in prompt]
        words = heard(prompt)
        for hold in self._holds:
            if hold.first in words and hold.until not in words and not hold.released.is_set():
                hold.seen.set()
                async with asyncio.timeout(HOLD_BOUND):
                    await hold.released.wait()
        if len(offered) == 1 and words:
            text = f'<response><output type="{offered[0]}">Heard {" ".join(words)}.</output></response>'
            reply = Reply(chunks=(text,))
        try:
            await super().stream(response, reply, body)
        except ConnectionError:  # a held request whose run was stopped meanwhile (BOT_BUSY=interrupt)
            return
