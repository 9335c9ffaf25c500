"""What the seed tests share: a scripted response, an input, and a small bot built on the public API."""

from __future__ import annotations

from typing import Any

from core import Action, Agent, Context, InMemoryStore, Output, ScriptedModel, context, create_agent, output
from core.testing import updates_of
from tests.agent_args import agent_args

chat = context(type="chat", schema=str, key=lambda s: s, max_steps=5)
"""The context most seed tests talk in: one conversation per string key."""


def R(body: str, *, reasoning: str = "thinking") -> str:
    """A response the scripted model sends: ``body`` after a short reasoning."""
    return f"<response><reasoning>{reasoning}</reasoning>{body}</response>"


def msg(text: str) -> dict[str, Any]:
    """A user's message to ``chat``."""
    return {"type": "chat:message", "data": text}


def bot(
    replies: Any,
    *,
    actions: tuple[Action, ...] = (),
    outputs: tuple[Output, ...] = (),
    contexts: tuple[Context, ...] = (chat,),
    sent: list[Any] | None = None,
    chunk_size: int = 16,
    **agent_kw: Any,
) -> tuple[Agent, ScriptedModel]:
    """An agent on the scripted model; ``chat:message`` outputs are appended to ``sent`` unless ``outputs`` are
    given."""
    sink = sent if sent is not None else []
    model = ScriptedModel(replies, chunk_size=chunk_size)
    agent = create_agent(
        **agent_args(
            model=model,
            contexts=contexts,
            actions=actions,
            outputs=outputs or (output(type="chat:message", handler=lambda data, ctx, agent: sink.append(data)),),
            memory=InMemoryStore(),
            **agent_kw,
        )
    )
    return agent, model


def section(prompt: str, name: str) -> str:
    """The text of ``<name>...</name>`` in a prompt; for ``updates``, the new entries the working memory ends with,
    which ``<updates count="N"/>`` counts (``core.testing.updates_of``)."""
    if name == "updates":
        return updates_of(prompt)
    return prompt.split(f"<{name}>", 1)[1].split(f"</{name}>", 1)[0]
