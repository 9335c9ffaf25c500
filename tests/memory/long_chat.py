"""A bot for long conversations, with a scripted model that behaves like a good one would: it folds facts
into the summary, calls ``search_history`` when asked about something it no longer sees, and answers from
the result. Used by the long-conversation tests (in process and with Redis workers) and by bench/.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

from bots.history_search import search_history
from core import Agent, ModelRequest, ScriptedModel, context, create_agent, output
from core.memory import HistoryStore, InMemoryStore, MemoryStore
from core.summary import SummaryLock, SummaryPolicy
from core.testing import updates_of
from tests.agent_args import agent_args

__all__ = ("QUESTION", "brain", "chat", "long_chat_agent", "message_text", "replies")

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=4, max_working_memory=40, keep_logs=200)

QUESTION = "What was the secret code I told you in my tenth message?"
FACT = "my favourite colour is teal"

replies: list[str] = []
"""What the bot answered, in this process."""

say = output(
    type="chat:message", description="A message to the user", handler=lambda data, ctx, ag: replies.append(data)
)


def message_text(n: int) -> str:
    """The ``n``-th message of the conversation (1-based): a fact at 7, a secret at 10, filler elsewhere,
    all about the same length."""
    if n == 7:
        return f"message {n:06d}: by the way, {FACT}, remember it"
    if n == 10:
        return f"message {n:06d}: the secret code is ALPHA-ZULU-10, keep it"
    return f"message {n:06d}: filler about the weather and the news today"


def _summary(request: ModelRequest) -> str:
    old = request.prompt.split("Summary so far:\n", 1)[1].split("\n\nNext messages:", 1)[0]
    facts = (
        set()
        if old.startswith("(none") or old.startswith("Small talk")
        else set(old.removeprefix("Facts: ").split("; "))
    )
    facts.update(m.group(0) for m in re.finditer(r"my favourite \w+ is \w+", request.prompt))
    return "Facts: " + "; ".join(sorted(facts)) if facts else "Small talk only."


def _say(text: str) -> str:
    return f'<response><reasoning>answering</reasoning><output type="chat:message">{text}</output></response>'


def brain(request: ModelRequest) -> str:
    """The scripted model's answer to ``request``."""
    if request.metadata.get("purpose") == "summary":
        return _summary(request)
    updates = updates_of(request.prompt)
    result = re.search(r'<action_result name="search_history"[^>]*>(.*?)</action_result>', updates, re.S)
    if result is not None:
        found: dict[str, Any] = json.loads(html.unescape(result.group(1)))
        codes = [m for msg in found["messages"] for m in re.findall(r"ALPHA-ZULU-\d+", msg["text"])]
        return _say(f"You told me the code {codes[0]}." if codes else "I could not find it.")
    if QUESTION in updates:
        call = json.dumps({"words": "secret code"})
        return (
            "<response><reasoning>older than what I see: search</reasoning>"
            f'<action_call name="search_history">{call}</action_call></response>'
        )
    return _say("noted")


def long_chat_agent(
    *,
    history: HistoryStore,
    memory: MemoryStore | None = None,
    every: int = 20,
    keep: int = 40,
    lock: SummaryLock | None = None,
    answer: Callable[[ModelRequest], str] = brain,
    **options: Any,
) -> tuple[Agent, ScriptedModel]:
    """The bot with ``history`` and a summary folded every ``every`` entries (``answer``: the model)."""
    model = ScriptedModel(answer, chunk_size=4096)
    agent = create_agent(
        **agent_args(
            model=model,
            contexts=[chat],
            actions=[search_history],
            outputs=[say],
            memory=memory if memory is not None else InMemoryStore(),
            history=history,
            summary=SummaryPolicy(every=every, keep=keep, timeout=10),
            summary_lock=lock,
            **options,
        )
    )
    return agent, model
