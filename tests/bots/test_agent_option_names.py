"""``bots.app.build_agent``'s options are ``core.AgentOptions``' fields, typed (``AgentOptionFields``): a misspelt
one is an error naming it, not an attribute set on the options that nothing reads (issue 52, point 3)."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from bots.app import build_agent
from bots.config import load_settings
from core import AgentOptions, ScriptedModel
from core.agent_options import AgentOptionFields


def test_the_typed_options_are_the_fields_of_agent_options() -> None:
    fields = {f.name: f.type for f in dataclasses.fields(AgentOptions)}
    hints = typing.get_type_hints(AgentOptionFields, localns={"ChatPolicy": object})
    assert set(AgentOptionFields.__annotations__) == set(fields)
    assert AgentOptionFields.__optional_keys__ == frozenset(fields)
    assert {name: str(hints[name]) for name in fields} == {
        name: str(typing.get_type_hints(AgentOptions, localns={"ChatPolicy": object})[name]) for name in fields
    }


def test_a_misspelt_option_is_an_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    settings = load_settings()
    model = ScriptedModel(["<response></response>"])
    with pytest.raises(TypeError, match=r"unknown option 'quiet_msx' \(did you mean 'quiet_ms'\?\)"):
        build_agent(settings, model=model, platforms=[], quiet_msx=5)  # type: ignore[call-arg]
    assert not (tmp_path / "data").exists()  # refused before anything was made
    agent = build_agent(settings, model=model, platforms=[], quiet_ms=250, max_tokens=77)
    assert (agent.quiet_ms, agent.max_tokens) == (250, 77)
