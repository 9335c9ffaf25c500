"""A platform is a package (issue 52): each declares itself with one ``Platform`` under the
``daydreams_bots.platforms`` entry point group, and core names none of them (the contract below reads core's
code: its identifiers and its strings other than docstrings; prose that gives an example may name one)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ConfigError
from extensions.platforms import ENTRY_POINT_GROUP, Platform, all_platforms, operator_channel, platform, platform_names

ROOT = Path(__file__).resolve().parent.parent


def test_the_platforms_are_registered_through_the_entry_point_group() -> None:
    assert platform_names() == ["cli", "discord", "matrix", "slack", "telegram", "web"]
    for found in all_platforms():
        assert isinstance(found, Platform)
        assert all(c.startswith(f"{found.name}:") for c in found.contexts), found.contexts
    assert platform("telegram").settings_group == "telegram"
    with pytest.raises(
        ConfigError, match=r"unknown platform 'teams': use one of cli, discord, matrix, slack, telegram"
    ):
        platform("teams")
    assert ENTRY_POINT_GROUP in (ROOT / "pyproject.toml").read_text()


def test_operator_channels_are_the_forms_the_platforms_declare() -> None:
    assert operator_channel("telegram:-100123:7") == ("telegram:chat", {"chat_id": -100123, "thread_id": 7})
    assert operator_channel(" discord:4567") == ("discord:channel", {"channel_id": 4567})
    assert operator_channel("matrix:!abc:example.org") == (
        "matrix:room",
        {"room_id": "!abc:example.org", "thread_id": None},
    )
    assert operator_channel("matrix:!abc:example.org/$root") == (
        "matrix:room",
        {"room_id": "!abc:example.org", "thread_id": "$root"},
    )
    assert operator_channel("slack:C0123ABC") == ("slack:conversation", {"channel": "C0123ABC", "thread_ts": None})
    assert operator_channel("slack:C0123ABC/1700000000.000100") == (
        "slack:conversation",
        {"channel": "C0123ABC", "thread_ts": "1700000000.000100"},
    )
    for wrong in (
        "slack:1",
        "slack:general",
        "web:abc",
        "discord:1:2",
        "telegram:x",
        "matrix:#alias:example.org",
        "matrix:!abc/x",
    ):
        with pytest.raises(
            ValueError,
            match=r"is not one: write discord:<channel id> or matrix:<room id>.* or slack:<channel id>.* or telegram:<chat id>",
        ):
            operator_channel(wrong)


def test_a_platform_not_used_is_not_imported() -> None:
    """Asking which platforms are configured imports their declarations, never their SDKs or runtimes (the web
    chat's package is still imported whole by ``bots.settings``, for its settings class)."""
    code = (
        "import sys; from bots.config import load_settings, platforms; "
        "print(platforms(load_settings())); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('discord', 'telegram') "
        "or m.startswith(('extensions.discord.', 'extensions.telegram.')) and m.endswith(('.runtime', '.listener'))))"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LLM_PROVIDER": "scripted", "TELEGRAM_TOKEN": "1:x"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=True
    )
    assert done.stdout.splitlines() == ["['telegram']", "[]"], done.stdout + done.stderr


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """The identifiers and non-docstring strings of a module, with their lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(stmt.value)
        for node in ast.walk(tree)
        for stmt in (node.body if isinstance(getattr(node, "body", None), list) else [])  # type: ignore[attr-defined]
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.alias):
            found.append((node.lineno, node.name))
    return found


def test_core_names_no_platform() -> None:
    """Names of platforms inside core/: 0. A registered platform's name as a word or an id prefix (``telegram``,
    ``discord:``, ``web:``), in core's code; what a platform needs from the engine it declares (``Platform``)."""
    names = platform_names()
    long_names = [n for n in names if len(n) > 3]  # (a word: telegram, discord)
    pattern = re.compile(
        rf"(?i)\b(?:{'|'.join(map(re.escape, long_names))})\b|(?:^|[\s'\"(])(?:{'|'.join(map(re.escape, names))}):"
    )
    hits = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        for line, text in _code_strings(path):
            if pattern.search(text.replace("_", " ")):
                hits.append(f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}")
    assert hits == []


def test_each_platform_s_settings_group_is_a_group_of_the_settings() -> None:
    """``bots config``, the settings reference and ``--explain`` show a platform's settings under its group."""
    from bots.explain import TASKS, TITLES
    from bots.settings import Settings

    [platform_task] = [groups for title, groups in TASKS if title.startswith("A platform")]
    for found in all_platforms():
        if found.settings_group is None:
            continue
        assert found.settings_group in Settings.model_fields, found.name
        assert found.settings_group in platform_task and TITLES[found.settings_group] == found.title


def test_the_terminal_declares_that_its_conversations_do_not_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BOT_QUIET_MS`` does not apply at a terminal (one line, then its answer): the terminal's ``Platform`` says so."""
    from bots.app import build_agent
    from bots.config import load_settings
    from core import ScriptedModel

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LLM_PROVIDER", "scripted")
    monkeypatch.setenv("BOT_QUIET_MS", "800")
    agent = build_agent(load_settings(), model=ScriptedModel(["<response></response>"]), platforms=["cli"])
    assert agent.chat_policy.quiet_ms_by_context == {"cli:session": 0}
    assert agent.chat_policy.default_quiet_ms == 800


ECHO_PLATFORM = """
from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from extensions.platforms import Platform
from extensions.terminal import cli_extension


class EchoSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ECHO_")
    token: SecretStr | None = None


def _channel(rest):
    return ("echo:room", {"room": int(rest)}) if rest.isdigit() else None


PLATFORM = Platform(
    name="echo",
    title="Echo",
    build=lambda build: cli_extension(media_dir=build.data_dir / "echo"),
    settings_group="echo",
    settings_class=EchoSettings,
    contexts=("echo:room",),
    configured=lambda group: group.token is not None,
    token_setting="ECHO_TOKEN",
    admin_ids=True,
    id_example="echo:1",
    channel=_channel,
    channel_forms="echo:<room>",
    ordered_dedupe=True,
)
"""

ECHO_CHECK = """
from bots.app import build_extensions
from bots.config import check_settings, load_settings, platforms
from bots.queue_settings import RedisSettings
from extensions.platforms import operator_channel

settings = load_settings()
print(platforms(settings))
print(operator_channel("echo:7"))
print("echo:" in RedisSettings().to_config().ordered_dedupe)
print(check_settings(settings))
print([e.name for e in build_extensions(settings, listen=False)])
"""


def test_a_platform_from_another_package_is_found_through_its_entry_point(tmp_path: Path) -> None:
    """A package installed beside the bot adds a platform with nothing edited here: its module declares a
    ``Platform`` and its metadata an entry point of the group (a ``.dist-info`` on the path is what pip leaves)."""
    site = tmp_path / "site"
    (site / "echo_platform").mkdir(parents=True)
    (site / "echo_platform" / "__init__.py").write_text(ECHO_PLATFORM)
    info = site / "echo_platform-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-platform\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\necho = echo_platform:PLATFORM\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(site),
        "LLM_PROVIDER": "scripted",
        "ECHO_TOKEN": "x",
        "BOT_ADMIN_USERS": "echo:1",
        "BOT_DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-c", ECHO_CHECK], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['echo']",
        "('echo:room', {'room': 7})",
        "True",
        "[]",
        "['cli']",  # (its extension: the terminal's, borrowed for this test)
    ]
