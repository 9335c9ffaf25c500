"""The estimated cost prices the input tokens a provider read from its prompt cache at their own rate when
``LLM_PRICES`` gives one (``model=input/output/cached``), at the input rate otherwise (issue 51)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError

from bots.settings import Settings
from core import ModelRequest, Price
from core.models.base import ModelUsage
from core.usage import USAGE, cost_micros, day_of
from extensions.terminal import cli_session

from .support import REPLY, CountingModel, make_agent


class CachingModel(CountingModel):
    """Reports that ``cached`` of its input tokens came from the provider's prompt cache."""

    def __init__(self, replies: Any, *, usage: tuple[int, int], cached: int) -> None:
        super().__init__(replies, usage=usage)
        self.cached = cached

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        async for chunk in super().stream(request):
            yield chunk
        self.last_usage = ModelUsage(
            input_tokens=self.usage[0], output_tokens=self.usage[1], cached_input_tokens=self.cached
        )


def test_cached_input_tokens_cost_their_own_rate_when_one_is_given() -> None:
    price = Price(input=2.0, output=10.0, cached_input=0.5)
    assert cost_micros(price, 1000, 10, cached_input_tokens=800) == 200 * 2 + 800 * 0.5 + 10 * 10
    assert cost_micros(price, 1000, 10) == 1000 * 2 + 10 * 10  # nothing read from the cache
    assert cost_micros(price, 100, 0, cached_input_tokens=500) == 100 * 0.5  # (never more than the input)
    assert cost_micros(Price(input=2.0, output=10.0), 1000, 10, cached_input_tokens=800) == 1000 * 2 + 10 * 10


def test_llm_prices_take_an_optional_cached_input_rate() -> None:
    settings = Settings(_env_file=None, llm={"prices": "gpt-4o-mini=0.15/0.6/0.075,gpt-4o=2.5/10"})  # type: ignore[call-arg]
    assert settings.llm.prices == {"gpt-4o-mini": (0.15, 0.6, 0.075), "gpt-4o": (2.5, 10.0)}
    with pytest.raises(ValidationError, match="LLM_PRICES must be model=input/output"):
        Settings(_env_file=None, llm={"prices": "gpt-4o=2.5/10/1/2"})  # type: ignore[call-arg]


async def test_a_call_read_mostly_from_the_cache_is_charged_at_the_cached_rate() -> None:
    model = CachingModel([REPLY], usage=(1000, 10), cached=800)
    agent = make_agent(model, prices={"scripted": Price(input=2.0, output=10.0, cached_input=0.5)})
    async with agent:
        await agent.send(cli_session, "ops", {"type": "cli:message", "data": "hello"})
    chat = await agent.provided(USAGE).totals("chat:cli:session:ops", [day_of()])
    assert (chat.input_tokens, chat.output_tokens, chat.cost_micros) == (1000, 10, 200 * 2 + 800 * 0.5 + 10 * 10)
