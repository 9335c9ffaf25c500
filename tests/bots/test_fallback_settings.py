"""LLM_FALLBACKS and LLM_BREAKER_*: read in both forms, built into a chain of models (keys only where they belong,
retries only on the last model), checked by bots config with one line per problem, shown with secrets masked."""

from __future__ import annotations

import pytest

from bots.app import build_summary_policy
from bots.config import check_settings, load_settings, settings_table
from bots.models import build_model, close_model
from core.errors import ConfigError
from core.models import AnthropicModel, FallbackModel, OpenAICompatModel, ScriptedModel

pytestmark = pytest.mark.usefixtures("settings_env")  # no setting from this machine, no .env but the test's own


async def test_the_chain_is_the_provider_then_each_entry_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "openai")
    monkeypatch.setenv("LLM_API_KEY", "sk-primary-0123456789")
    monkeypatch.setenv("LLM_MODEL", "gpt-4o")
    monkeypatch.setenv("LLM_RETRIES", "2")
    monkeypatch.setenv("LLM_TIMEOUT", "20")
    monkeypatch.setenv("LLM_BREAKER_FAILURES", "5")
    monkeypatch.setenv("LLM_BREAKER_PAUSE", "90")
    monkeypatch.setenv("ANTHROPIC_KEY_FOR_TESTS", "sk-ant-0123456789")
    monkeypatch.setenv(
        "LLM_FALLBACKS",
        '["openai:gpt-4o-mini", "openai:llama3.2:3b@http://127.0.0.1:11434/v1", '
        '{"provider": "anthropic", "model": "claude-3-5-haiku-latest", "api_key": "${ANTHROPIC_KEY_FOR_TESTS}"}, '
        '"scripted"]',
    )
    settings = load_settings()
    assert check_settings(settings) == []
    chain = build_model(settings.llm)
    try:
        assert isinstance(chain, FallbackModel)
        primary, mini, ollama, claude, scripted = chain.models
        assert isinstance(primary, OpenAICompatModel) and primary.model == "gpt-4o"
        assert isinstance(mini, OpenAICompatModel) and mini.model == "gpt-4o-mini"
        assert mini._secret == "sk-primary-0123456789"  # the same provider at the same URL: LLM_API_KEY
        assert isinstance(ollama, OpenAICompatModel) and ollama.model == "llama3.2:3b"
        assert ollama._secret is None and ollama.base_url == "http://127.0.0.1:11434/v1"  # another server: no key
        assert isinstance(claude, AnthropicModel) and claude._secret == "sk-ant-0123456789"
        assert isinstance(scripted, ScriptedModel)
        assert [m.retry.retries for m in (primary, mini, ollama, claude)] == [0, 0, 0, 0]  # the next model retries
        assert chain.timeout == 20 and chain.breakers[0].policy.failures == 5 and chain.breakers[0].policy.pause == 90
        assert chain.name == "openai:gpt-4o" and chain.model == "gpt-4o"
    finally:
        await close_model(chain)


async def test_the_last_model_keeps_llm_retries_and_the_summary_model_is_no_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "openai")
    monkeypatch.setenv("LLM_API_KEY", "sk-primary-0123456789")
    monkeypatch.setenv("LLM_RETRIES", "2")
    monkeypatch.setenv("LLM_SUMMARY_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("LLM_FALLBACKS", "openai:llama3.2@http://127.0.0.1:11434/v1")
    settings = load_settings()
    chain = build_model(settings.llm)
    summary = build_summary_policy(settings).model
    try:
        assert isinstance(chain, FallbackModel)
        first, last = chain.models
        assert isinstance(first, OpenAICompatModel) and isinstance(last, OpenAICompatModel)
        assert (first.retry.retries, last.retry.retries) == (0, 2)
        assert isinstance(summary, OpenAICompatModel) and summary.model == "gpt-4o-mini"
    finally:
        await close_model(chain)
        if summary is not None:
            await close_model(summary)


def test_without_fallbacks_the_model_is_the_provider_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    assert isinstance(build_model(load_settings().llm), ScriptedModel)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("openai:gpt-4o", "LLM_FALLBACKS entry 1 (openai:gpt-4o): needs an api_key for api.openai.com"),
        ("anthropic", "LLM_FALLBACKS entry 1 (anthropic): needs an api_key"),
        ("openai@http://127.0.0.1:8000/v1", "names no model: write the one served at http://127.0.0.1:8000/v1"),
        ("scripted,scripted", None),
    ],
)
def test_an_entry_that_cannot_be_built_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str | None
) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setenv("LLM_FALLBACKS", value)
    settings = load_settings()
    problems = check_settings(settings)
    if problem is None:
        assert problems == []
        return
    assert len(problems) == 1 and problem in problems[0]
    with pytest.raises(ConfigError, match="LLM_FALLBACKS entry 1"):
        build_model(settings.llm)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("gemini:pro", "LLM_FALLBACKS"),
        ("local:qwen", "local takes no model"),
        ('[{"provider": "openai", "base_url": "ftp://x"}]', "is not an http(s) URL"),
        ('[{"provider": "openai", "api_key": "${NOT_SET_ANYWHERE_42}"}]', "NOT_SET_ANYWHERE_42"),
        ('[{"provider": "openai", "modle": "x"}]', "modle"),
    ],
)
def test_a_malformed_entry_is_refused_when_the_settings_are_read(
    monkeypatch: pytest.MonkeyPatch, value: str, words: str
) -> None:
    monkeypatch.setenv("LLM_FALLBACKS", value)
    with pytest.raises(ConfigError) as raised:
        load_settings()
    assert words in str(raised.value) and "LLM_FALLBACKS" in str(raised.value)


def test_the_embedded_model_is_in_the_chain_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "local")
    monkeypatch.setenv("LLM_FALLBACKS", "scripted,local")
    problems = check_settings(load_settings())
    assert "LLM_FALLBACKS names the embedded model (local) twice: keep it once, last in the chain" in problems


def test_bots_config_shows_the_chain_in_order_with_its_keys_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_PROVIDER", "openai")
    monkeypatch.setenv("LLM_API_KEY", "sk-primary-0123456789")
    monkeypatch.setenv(
        "LLM_FALLBACKS",
        '[{"provider": "openai", "model": "m", "base_url": "https://user:url-pass-42@llm.internal/v1?token=qs-secret",'
        ' "api_key": "sk-fallback-secret-99"}, "local"]',
    )
    rows = {var: (shown, source) for var, shown, source in settings_table(load_settings())}
    assert rows["LLM_FALLBACKS"] == (
        "openai:m@https://user:********@llm.internal/v1?token=******** (key ********),local",
        "environment",
    )
    assert rows["LLM_BREAKER_FAILURES"] == ("3", "default")
    assert rows["LLM_BREAKER_WINDOW"] == ("60.0", "default")
    assert rows["LLM_BREAKER_PAUSE"] == ("30.0", "default")
    for secret in ("sk-fallback-secret-99", "url-pass-42", "qs-secret", "sk-primary"):
        assert secret not in repr(rows)
