"""What the reminder tests of both platforms share: the scripted model's action calls, the newest action result it
was shown, a model that sets a recurring reminder and answers each occurrence, and the bots ``build_agent`` builds
(schedules in its memory store, on a ``ManualClock``), stopped after the test."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bots.app import build_agent
from bots.settings import Settings
from core import Agent, ModelRequest, ScriptedModel
from core.schedules import ManualClock

__all__ = ("StartBot", "call", "last_result", "recurring_model", "started_bots")

StartBot = Callable[..., Awaitable[Agent]]
"""``start(model, clock=None, **bot_settings)``: a started bot of ``started_bots``."""


def call(name: str, args: dict[str, Any]) -> str:
    """The model's call of the action ``name`` with ``args``."""
    return f'<response><action_call name="{name}">{json.dumps(args)}</action_call></response>'


def last_result(request: ModelRequest) -> str:
    """The newest action result the model was shown (the text after the last ``result`` tag opens, up to its
    end)."""
    return request.prompt.rpartition("<action_result")[2].partition("</action_result>")[0][:600]


def recurring_model(
    reminder: dict[str, Any], say: Callable[[str], str], occurrence: Callable[[int], str]
) -> ScriptedModel:
    """Calls ``set_reminder`` with ``reminder``, says ``Set: <its result>``, then at the n-th occurrence (from 1)
    says ``occurrence(n)``; ``say`` writes the platform's message output."""
    fired = 0

    def at_the_occurrence(request: ModelRequest) -> str:
        nonlocal fired
        fired += 1
        return say(occurrence(fired))

    steps = [call("set_reminder", reminder), lambda request: say(f"Set: {last_result(request)}"), at_the_occurrence]
    return ScriptedModel(steps, repeat_last=True)


@contextlib.asynccontextmanager
async def started_bots(tmp_path: Path, platform: str, **sections: Any) -> AsyncIterator[StartBot]:
    """Start bots on ``platform`` (its settings' section in ``sections``: ``telegram={...}``) with their data in
    ``tmp_path``, the scripted provider and schedules looked at every 0.05 s; each is stopped at the end."""
    started: list[Agent] = []

    async def start(model: ScriptedModel, clock: ManualClock | None = None, **bot: Any) -> Agent:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            bot={"data_dir": str(tmp_path / "data"), "platforms": platform, "schedules_poll": 0.05, **bot},
            llm={"provider": "scripted"},
            **sections,
        )
        agent = build_agent(settings, model=model, schedules_clock=clock)
        started.append(agent)
        await agent.start()
        return agent

    try:
        yield start
    finally:
        for agent in started:
            await agent.stop()
