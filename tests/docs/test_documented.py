"""What the generated references are built from is there: a docstring for every public name of ``core``, a
description for every setting, and ``bots config --explain`` for each of them."""

from __future__ import annotations

import inspect

import pytest

import core
from bots.explain import COMMON, TASKS, explain, setting_entries
from bots.settings import Settings
from core.errors import ConfigError


def own_docstring(obj: object) -> str:
    """The docstring written for ``obj`` itself: not one inherited from a base class, nor the signature a
    dataclass writes when it has none."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__") or ""
        return "" if doc.startswith(f"{obj.__name__}(") else doc
    return inspect.getdoc(obj) or ""


@pytest.mark.parametrize("name", core.__all__)
def test_every_public_name_of_core_has_a_docstring(name: str) -> None:
    assert own_docstring(getattr(core, name)).strip(), (
        f"core.{name} has no docstring: the Python API reference (docs, reference/api.md) shows it from there"
    )


def test_every_setting_has_a_description_and_an_entry() -> None:
    entries = setting_entries()
    missing = [entry.name for entry in entries if not entry.description.strip()]
    assert not missing, f"settings without a description (Field(description=...)): {missing}"
    assert len({entry.name for entry in entries}) == len(entries)
    assert set(COMMON) <= {entry.name for entry in entries}, "COMMON names a variable that is no setting"
    assert {group for _, groups in TASKS for group in groups} == set(Settings.model_fields), (
        "every settings group is under one operator task (bots.explain.TASKS)"
    )


def test_explain_prints_one_setting() -> None:
    text = explain("telegram_token")
    assert text.startswith("TELEGRAM_TOKEN  (Telegram)")
    assert "secret" in text and "set by most deployments" in text and "BotFather" in text
    bounded = explain("BOT_STOP_TIMEOUT")
    assert "bounds   >= 0, <= 600" in bounded and "default  10.0" in bounded


def test_explain_names_the_closest_settings_for_a_typo() -> None:
    with pytest.raises(ConfigError, match="TELEGRAM_TOKN is not a setting: did you mean TELEGRAM_TOKEN"):
        explain("TELEGRAM_TOKN")


def test_bots_config_explain_prints_one_setting_and_refuses_a_typo(capsys: pytest.CaptureFixture[str]) -> None:
    """``bots config --explain NAME`` on the command line (it reads no settings: a broken .env does not stop it)."""
    from bots.cli import main

    assert main(["config", "--explain", "TELEGRAM_TOKEN"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TELEGRAM_TOKEN") and "Telegram" in out
    assert main(["config", "--explain", "TELEGRAM_TOKN"]) == 2
    assert "TELEGRAM_TOKEN" in capsys.readouterr().err
