"""The span of a model call answered by the second model of a chain (LLM_FALLBACKS) names the model that answered
and carries an event for the one that failed."""

from __future__ import annotations

from core.models import FallbackModel
from extensions.terminal import cli_session
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.ops.support import make_agent

from .conftest import Traced

ANSWER = ('<response><output type="cli:message">', "Hi there", "</output></response>")


async def test_the_call_span_says_which_model_answered_and_which_failed(traced: Traced) -> None:
    first = FakeOpenAIServer(default=Reply(status=502, message="bad gateway"))
    second = FakeOpenAIServer(default=Reply(chunks=ANSWER, usage=(20, 2)))
    async with first, second:
        chain = FallbackModel([first.model("first"), second.model("second")], timeout=5)
        agent = make_agent(chain)
        async with agent:
            await agent.send(cli_session, "trace", {"type": "cli:message", "data": "hello"})
        await chain.aclose()
    [call] = [s for s in traced.spans() if s.name.startswith("chat ")]
    attributes = dict(call.attributes or {})
    assert attributes["gen_ai.request.model"] == "first"  # what the bot is configured with
    assert attributes["gen_ai.response.model"] == "second"  # what answered
    assert attributes["gen_ai.provider.name"] == "openai" and attributes["gen_ai.usage.input_tokens"] == 20
    [failed] = [e for e in call.events if e.name == "gen_ai.model.failed"]
    assert (failed.attributes or {})["gen_ai.request.model"] == "first"
    assert "HTTP 502" in str((failed.attributes or {})["error.message"])
