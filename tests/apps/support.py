"""What the tests of bots run as an APP share: the scripted model behind a fake OpenAI-compatible server, each
example's conversation (two turns, as its model would write them), and the two platforms as a user meets them.

A conversation has two turns on a platform. In the first, the model calls the author's action; in the second it
is asked again, and its prompt must show what the action saved (``_outputPath``: the chat's ``<state>``, or the
context's ``render``); one of the turns uses the author's own output, whose handler posts on the platform with
``agent.say``. The model's answers are written for the platform's reply output (``{reply}`` in them is
``telegram:message`` or ``discord:message``), and the model server tells the platforms apart by the reply output
each prompt offers, so Telegram's and Discord's conversations can run at once in one process or one fleet.
"""

from __future__ import annotations

import re
import textwrap
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes.discord_server import FakeDiscord, Json
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.fakes.telegram_server import FakeTelegramServer

__all__ = (
    "CONVERSATIONS",
    "EXAMPLES",
    "IDLE",
    "OWN_ARGS",
    "PLATFORMS",
    "README",
    "Conversation",
    "DiscordUser",
    "ScriptedServer",
    "TelegramUser",
    "Turn",
    "prompt_of",
    "readme_bot",
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
README = ROOT / "README.md"
PLATFORMS = ("telegram", "discord")
DEADLINE = 60.0
"""Seconds a test waits for something to happen (a bound, not a timing assertion)."""
IDLE = "<response><reasoning>Nothing more to do.</reasoning></response>"
"""What the model answers when its script for the platform is done (the step after the last action's result)."""


@dataclass(frozen=True, kw_only=True)
class Turn:
    """What the user says, what the model answers (one reply per step of the run, the last one included: the next
    user message must find the run over, not join it), and what the user then sees in the chat."""

    says: str
    answers: Sequence[str]
    """Each with ``{reply}`` for the platform's reply output."""
    sees: Sequence[str]
    """Texts one of the bot's messages must all contain once the turn is answered (as the platform shows it:
    Telegram shows a Markdown list item ``* a`` as ``• a``)."""


@dataclass(frozen=True, kw_only=True)
class Conversation:
    """An APP and its conversation of two turns."""

    app: str
    """What ``bots run`` is given (a path; ``README``: the README's bot, written to a file by the test)."""
    first: Turn
    """The model calls the author's action."""
    second: Turn
    saved: Sequence[str]
    """What the model's first prompt of the second turn shows, and its first prompt of the first did not: what the
    action saved, as the chat's ``<state>`` or the context's ``render`` shows it."""
    action: str
    """The author's action the model calls."""
    output: str | None
    """The author's output the model uses (None: the bot has none)."""

    def answers(self, reply: str) -> list[str]:
        """Every answer of the model, in order, for the platform whose reply output is ``reply``."""
        return [a.replace("{reply}", reply) for turn in (self.first, self.second) for a in turn.answers]


def _reply(text: str) -> str:
    return f'<response><output type="{{reply}}">{text}</output></response>'


NOTEBOOK = Conversation(
    app="examples/notebook_bot.py",
    first=Turn(
        says="Remember: buy oat milk",
        answers=[
            '<response><action_call name="remember">{"text": "buy oat milk"}</action_call></response>',
            _reply("Noted."),
        ],
        sees=["Noted."],
    ),
    second=Turn(
        says="What is in my notebook?",
        answers=[
            '<response><output type="notebook:card" title="Your notes">You asked me to remember:</output></response>'
        ],
        sees=["[Your notes]\nYou asked me to remember:\n", "buy oat milk"],
    ),
    saved=['<state>{"state": {"notes": ["buy oat milk"]}}', "Notes:\n- buy oat milk\nCards shown: 0"],
    action="remember",
    output="notebook:card",
)
TOOLS = Conversation(
    app="examples/tool_bot.py",
    first=Turn(
        says="What's the weather in Paris?",
        answers=['<response><action_call name="weather">{"city": "Paris"}</action_call></response>', _reply("Got it.")],
        sees=["Got it."],
    ),
    second=Turn(
        says="Show me the forecast",
        answers=['<response><output type="weather:report">A good day for a walk.</output></response>'],
        sees=["Paris: sunny, 21 °C. A good day for a walk."],  # the handler read the state the first turn saved
    ),
    saved=['<state>{"state": {"weather": {"city": "Paris", "sky": "sunny", "celsius": 21}}}'],
    action="weather",
    output="weather:report",
)
PLAN = Conversation(
    app="examples/plan_bot.py",
    first=Turn(
        says="I am going to Paris, Rome and Oslo. What should I pack?",
        answers=[
            "<response>"
            '<action_call name="pack">{"forecasts": "†state.trip.forecasts"}</action_call>'
            '<action_call name="forecast">{"_instances": [{"city": "Paris"}, {"city": "Rome"}, {"city": "Oslo"}], '
            '"_outputPath": "†state.trip.forecasts"}</action_call>'
            '<output type="trip:checklist">{{calls[0].summary}}</output>'
            "</response>",
            IDLE,  # the step after the results: the checklist is posted before it
        ],
        sees=["Packing list:\n[ ] sunglasses for Paris\n[ ] an umbrella for Rome\n[ ] a scarf for Oslo"],
    ),
    second=Turn(
        says="What was the sky in Rome?",
        answers=[_reply("Rainy in Rome.")],
        sees=["Rainy in Rome."],
    ),
    saved=[
        '<state>{"state": {"trip": {"forecasts": [{"city": "Paris", "sky": "sunny"}, {"city": "Rome", "sky": "rainy"}, '
        '{"city": "Oslo", "sky": "snowy"}]}}}'
    ],
    action="forecast",
    output="trip:checklist",
)
README_NOTES = Conversation(
    app="README",
    first=Turn(
        says="Remember milk",
        answers=['<response><action_call name="keep">{"text": "buy milk"}</action_call></response>', _reply("Kept.")],
        sees=["Kept."],
    ),
    second=Turn(
        says="What do you keep?",
        answers=['<response><output type="notes:list">You keep:</output></response>'],
        sees=["You keep: buy milk"],  # the output's handler read the state the first turn saved
    ),
    saved=["Notes: buy milk"],
    action="keep",
    output="notes:list",
)
CONVERSATIONS = {"readme": README_NOTES, "notebook": NOTEBOOK, "tools": TOOLS, "plan": PLAN}
OWN_ARGS = Conversation(
    app="tests/apps/own_args_bot.py",
    first=Turn(
        says="Note: buy bread",
        answers=['<response><action_call name="note">{"text": "buy bread"}</action_call></response>', _reply("Noted.")],
        sees=["Noted."],
    ),
    second=Turn(says="What did I note?", answers=[_reply("Bread.")], sees=["Bread."]),
    saved=["a private chat on {platform}; notes: buy bread"],
    action="note",
    output=None,
)
"""A bot with its own context schema whose render reads ``state.args`` (tests/apps/test_own_args.py); ``{platform}``
in what it saved is the platform's name."""


_BLOCK = re.compile(r"^```python[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)


def readme_bot(folder: Path) -> Path | None:
    """The README's author example as a file in ``folder``: its python block defining ``bot = Bot(`` with an action
    saving to the state, as a reader saves it (``notes.py``); None when the README shows no such bot."""
    for block in _BLOCK.finditer(README.read_text(encoding="utf-8")):
        code = textwrap.dedent(block["code"])
        if re.search(r"^bot = Bot\(", code, re.M) and "_outputPath" in code:  # (not the ten-line one before it)
            path = folder / "readme_bot.py"
            path.write_text(code, encoding="utf-8")
            return path
    return None


def prompt_of(body: dict[str, Any]) -> str:
    """The text of every message of a chat completions request, one after the other."""
    parts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "\n".join(parts)


class ScriptedServer(FakeOpenAIServer):
    """A fake OpenAI-compatible model answering each platform from its own script: a request whose prompt offers
    ``telegram:message`` takes the next answer of Telegram's, and so on; ``IDLE`` once a script is done."""

    def __init__(self, conversation: Conversation, platforms: Sequence[str] = PLATFORMS) -> None:
        super().__init__(default=Reply(chunks=(IDLE,)))
        self.scripts = {p: deque(conversation.answers(f"{p}:message")) for p in platforms}

    async def __aenter__(self) -> ScriptedServer:
        await super().__aenter__()
        return self

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        script = self.scripts.get(self.platform_of(prompt_of(body)) or "")
        if script:
            reply = Reply(chunks=(script.popleft(),))
        await super().stream(response, reply, body)

    def platform_of(self, prompt: str) -> str | None:
        found = [p for p in self.scripts if f'type="{p}:message"' in prompt or f"{p}:message" in prompt]
        return found[0] if len(found) == 1 else None

    def prompts(self, platform: str) -> list[str]:
        """The prompts of ``platform``'s requests, in order."""
        prompts = (prompt_of(r.body) for r in self.requests if r.path.endswith("/chat/completions"))
        return [p for p in prompts if self.platform_of(p) == platform]


def _shown(texts: Sequence[str], seen: Sequence[str]) -> bool:
    return any(all(text in message for text in texts) for message in seen)


class TelegramUser:
    """A user in a private chat with the bot on the fake Bot API."""

    def __init__(self, telegram: FakeTelegramServer, user_id: int) -> None:
        self.telegram, self.user_id = telegram, user_id

    def says(self, text: str) -> None:
        self.telegram.user_says(text, user_id=self.user_id)

    def seen(self) -> list[str]:
        return [m.text for m in self.telegram.sent if m.chat_id == self.user_id and not m.deleted]

    async def sees(self, texts: Sequence[str]) -> None:
        await self.telegram.wait_for(lambda: _shown(texts, self.seen()), timeout=DEADLINE)


class DiscordUser:
    """A user in a direct message with the bot on the fake Discord."""

    def __init__(self, discord: FakeDiscord, name: str) -> None:
        self.discord = discord
        self.user: Json = discord.user(name)
        self.dm = discord.dm_channel(self.user)

    async def says(self, text: str) -> None:
        await self.discord.say(self.dm, text, author=self.user)

    def seen(self) -> list[str]:
        return [str(m["content"]) for m in self.discord.visible_in(self.dm)]

    async def sees(self, texts: Sequence[str]) -> None:
        await self.discord.wait_until(lambda: _shown(texts, self.seen()), timeout=DEADLINE)
