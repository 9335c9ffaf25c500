"""A warm start: the request a conversation's first message will make, for the embedded model to evaluate while the
bot starts (``LocalModel.warm``), so that the first answer after the prompt appears is no slower than a later one.

The request is built as the step loop builds it for the compact prompt (``core.prompt.build_compact_prompt``), for
the terminal chat's conversation when the bot has one, else for the first conversation context of a platform, in
the instance its ``example_args`` name (a private chat): its system prompt and its tools are what every first
message of that platform shares. A context without ``example_args`` is not warmed (its key may read arguments of
a shape only its platform knows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.chat_settings import escape_persona
from core.entries import InputRef
from core.models import ModelRequest
from core.prompt import build_compact_prompt
from core.turns import TURN_STOPS

if TYPE_CHECKING:
    from core import Agent

__all__ = ("first_request",)

_FIRST_WORDS = "Hello!"
"""The message the warm-up stands for (only the prompt around it is kept)."""


async def first_request(agent: Agent) -> ModelRequest | None:
    """The compact request of a first message in the bot's main conversation (None: the agent does not use the
    compact prompt, or has no conversation context with ``example_args``)."""
    if not agent.compact_prompt:
        return None
    contexts = [c for c in agent.registry.contexts.values() if c.conversation and c.example_args is not None]
    if not contexts:
        return None
    chosen = next((c for c in contexts if c.type == "cli:session"), contexts[0])
    state = await agent.load_state(chosen, chosen.example_args)  # (a platform's own arguments: its key reads them)
    deps = agent.run_deps()
    actions, outputs = agent.available(state)
    persona = escape_persona(state.chat.persona) if state.chat.persona else deps.persona
    said = InputRef(type=chosen.type.split(":")[0] + ":message", text=_FIRST_WORDS)
    prompt = build_compact_prompt(
        state=state,
        outputs=outputs,
        updates=[said],
        persona=persona,
        actions=actions if deps.calls_tools else [],
        tools=deps.calls_tools,
    )
    return ModelRequest(
        system=prompt.system,
        prompt=prompt.prompt,
        max_tokens=1,
        plain=True,
        turns=prompt.turns,
        tools=prompt.tools,
        stop=TURN_STOPS,
        metadata={"context_id": state.id},
    )
