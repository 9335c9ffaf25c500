"""A bot on a chain of models built from LLM_FALLBACKS, talking in the web chat, against two fake OpenAI-compatible
servers: the message the first model fails is answered by the second, and the console's usage page shows both, and
the input tokens the second read from its prompt cache."""

from __future__ import annotations

import aiohttp

from bots.models import build_model
from bots.settings import LlmSettings
from core.models import FallbackModel
from core.usage import USAGE, day_of
from tests.fakes.openai_server import FakeOpenAIServer, Reply

from .conftest import Bot, StartBot, client, csrf_of, login, until


def said(text: str) -> tuple[str, ...]:
    return ('<response><output type="web:message">', text, "</output></response>")


async def talk(bot: Bot, visitor: aiohttp.ClientSession, text: str) -> None:
    async with visitor.get(bot.chat_url) as response:
        csrf = csrf_of(await response.text())
    async with visitor.post(bot.chat_url + "chat/send", json={"text": text}, headers={"X-CSRF-Token": csrf}) as r:
        assert r.status == 202, await r.text()


async def test_the_usage_page_shows_the_model_that_answered_each_message(start_bot: StartBot) -> None:
    first = FakeOpenAIServer(replies=[Reply(chunks=said("from one"), usage=(100, 7)), Reply(status=503)])
    second = FakeOpenAIServer(default=Reply(chunks=said("from two"), usage=(40, 4), cached=32))
    async with first, second:
        llm = LlmSettings(
            provider="openai",  # type: ignore[arg-type]
            base_url=first.url,
            model="model-one",
            timeout=5,
            fallbacks=f"openai:model-two@{second.url}",  # type: ignore[arg-type]
        )
        model = build_model(llm)
        assert isinstance(model, FallbackModel)
        bot = await start_bot(model)

        async def counted(name: str) -> bool:
            return (await bot.agent.provided(USAGE).totals(f"model:{name}", [day_of()])).input_tokens > 0

        async with client() as visitor:

            async def answered(text: str) -> bool:
                async with visitor.get(bot.chat_url + "chat/history") as response:
                    return text in [m["text"] for m in (await response.json())["messages"]]

            await talk(bot, visitor, "hello")
            await until(lambda: answered("from one"))  # the run is over before the next message
            await until(lambda: counted("model-one"))
            await talk(bot, visitor, "and again")  # the first model answers 503: the second answers it
            await until(lambda: answered("from two"))
            await until(lambda: counted("model-two"))
            async with visitor.get(bot.chat_url + "chat/history") as response:
                texts = [m["text"] for m in (await response.json())["messages"]]
        async with client() as operator:
            await login(operator, bot)
            page = ""

            async def shown() -> bool:
                nonlocal page
                async with operator.get(bot.console_url + "usage") as response:
                    assert response.status == 200
                    page = await response.text()
                return "model-one" in page and "model-two" in page

            await until(shown)
    assert texts.count("from one") == 1 and texts.count("from two") == 1
    assert '<div class="figure">32</div><div class="label">input tokens read from the provider' in page
    assert '<th>conversation</th><th class="num">input</th><th class="num">of it cached</th>' in page
    assert len(first.requests) == 2 and len(second.requests) == 1
