"""The web chat's and the console's HTTP servers against hostile requests: secrets in URL query strings masked on
the settings page, malformed input refused with a clean 400, half-sent requests dropped and connections capped."""

from __future__ import annotations

from .conftest import StartBot, client, login, scripted

LLM_URL = "https://x.example/v1?api-key=llm-query-key-value"


async def test_secrets_in_url_query_strings_are_masked_on_the_console_settings_page(start_bot: StartBot) -> None:
    bot = await start_bot(scripted("hi"), llm={"base_url": LLM_URL})
    async with client() as session:
        await login(session, bot)
        async with session.get(bot.console_url + "settings") as response:
            html = await response.text()
    assert response.status == 200
    assert "llm-query-key-value" not in html
    assert "https://x.example/v1?api-key=********" in html
