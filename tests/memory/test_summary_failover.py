"""A summary written by a chain of models (LLM_FALLBACKS) is counted under the model that wrote it."""

from __future__ import annotations

from pathlib import Path

from core import InMemoryUsage, ModelError, ScriptedModel, create_agent
from core.memory import InMemoryStore, SQLiteHistory
from core.models import FallbackModel
from core.summary import SUMMARIZER, SummaryPolicy
from core.usage import day_of
from tests.agent_args import agent_args

from .long_chat import brain, chat, message_text, say


async def test_a_summary_the_first_model_fails_is_counted_under_the_one_that_wrote_it(tmp_path: Path) -> None:
    down = ScriptedModel(lambda request: ModelError("HTTP 503", transient=True))
    down.name, down.model = "openai:down", "down"
    backup = ScriptedModel(brain, chunk_size=4096)
    backup.name, backup.model = "openai:backup", "backup"
    usage = InMemoryUsage()
    agent = create_agent(
        **agent_args(
            model=ScriptedModel(brain, chunk_size=4096),
            contexts=[chat],
            outputs=[say],
            memory=InMemoryStore(),
            history=SQLiteHistory(tmp_path / "h.sqlite3"),
            summary=SummaryPolicy(every=5, keep=5, timeout=10, model=FallbackModel([down, backup])),
            usage=usage,
        )
    )
    assert agent.provided(SUMMARIZER) is not None
    async with agent:
        for n in range(1, 12):
            await agent.send(chat, "room", {"type": "chat:message", "data": message_text(n)})
        await agent.provided(SUMMARIZER).idle()
    assert agent.provided(SUMMARIZER).folds > 0 and down.requests and backup.requests
    today = [day_of()]
    assert (await usage.totals("model:backup", today)).input_tokens > 0
    assert (await usage.totals("model:down", today)).input_tokens == 0
