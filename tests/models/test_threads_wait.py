"""``LLM_THREADS_WAIT``: whether the embedded model's OpenMP threads sleep (the default) or spin while they wait for
each other within each token, from the setting to ``OMP_WAIT_POLICY`` when xllamacpp is imported. Nothing here loads
a model or imports the real xllamacpp: OpenMP would read the policy once for the whole test process."""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from bots.config import load_settings
from bots.models import build_model
from bots.settings import LlmSettings
from core.errors import ConfigError
from core.models import LocalModel, llama_server
from core.models import local as local_module


@pytest.fixture
def fake_xllamacpp(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A stand-in for xllamacpp, already imported, and no policy remembered yet."""
    fake = types.ModuleType("xllamacpp")
    monkeypatch.setitem(sys.modules, "xllamacpp", fake)
    monkeypatch.setattr(llama_server, "_first_policy", None)
    return fake


def test_the_setting_reaches_the_local_model(tmp_path: Path) -> None:
    default = build_model(LlmSettings(provider="local", threads=1), data_dir=tmp_path)
    assert isinstance(default, LocalModel) and default.spin is False  # (sleep: a shared machine stays steady)
    spinning = build_model(LlmSettings(provider="local", threads=1, threads_wait="spin"), data_dir=tmp_path)
    assert isinstance(spinning, LocalModel) and spinning.spin is True and not spinning.loaded


def test_the_environment_variable_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # (no .env of the working tree)
    monkeypatch.setenv("LLM_THREADS_WAIT", "spin")
    assert load_settings().llm.threads_wait == "spin"
    monkeypatch.delenv("LLM_THREADS_WAIT")
    assert load_settings().llm.threads_wait == "sleep"


def test_a_bad_value_is_refused_naming_the_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLM_THREADS_WAIT", "fast")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).splitlines()[1:] == [
        "  LLM_THREADS_WAIT='fast': input should be 'sleep' or 'spin'; fix it or unset it (default: sleep)"
    ]


def test_loading_asks_for_the_models_policy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked: list[bool] = []

    def recorded(missing: str, *, spin: bool = False) -> Any:
        asked.append(spin)
        raise ConfigError("stopped before loading")

    monkeypatch.setattr(local_module, "import_xllamacpp", recorded)
    for spin in (True, False):
        model = LocalModel(model_path=tmp_path / "m.gguf", threads=1, spin=spin)
        with pytest.raises(ConfigError, match="stopped before loading"):
            model._load()  # (what load runs in a thread)
    assert asked == [True, False]


def test_spin_sets_an_active_wait(monkeypatch: pytest.MonkeyPatch, fake_xllamacpp: types.ModuleType) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # (the operator's own policy gives way to LLM_THREADS_WAIT=spin)
    assert llama_server.import_xllamacpp("needs xllamacpp", spin=True) is fake_xllamacpp
    assert llama_server.os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_sleep_is_the_default_and_leaves_an_operators_policy_alone(
    monkeypatch: pytest.MonkeyPatch, fake_xllamacpp: types.ModuleType
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    llama_server.import_xllamacpp("needs xllamacpp")
    assert llama_server.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setattr(llama_server, "_first_policy", None)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    llama_server.import_xllamacpp("needs xllamacpp")
    assert llama_server.os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_another_policy_after_the_first_import_is_warned_about(
    monkeypatch: pytest.MonkeyPatch, fake_xllamacpp: types.ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    caplog.set_level(logging.WARNING, logger=llama_server.__name__)
    llama_server.import_xllamacpp("needs xllamacpp")  # the first import: sleeping
    llama_server.import_xllamacpp("needs xllamacpp")  # the knowledge base's embedder, the same policy: nothing said
    assert caplog.records == []
    llama_server.import_xllamacpp("needs xllamacpp", spin=True)
    (record,) = caplog.records
    assert "OMP_WAIT_POLICY=PASSIVE" in record.getMessage()
    assert "LLM_THREADS_WAIT=spin takes effect at the next start" in record.getMessage()


def test_a_spinning_model_then_a_sleeping_embedder_agree(
    monkeypatch: pytest.MonkeyPatch, fake_xllamacpp: types.ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """The chat model loads first (at start) and spins; the embedder asks for nothing of its own and is not warned
    about: the process already spins, as the operator asked."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    caplog.set_level(logging.WARNING, logger=llama_server.__name__)
    llama_server.import_xllamacpp("needs xllamacpp", spin=True)
    llama_server.import_xllamacpp("needs xllamacpp")
    assert caplog.records == [] and llama_server.os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
