"""``MCP_SERVERS``: a JSON list, an mcpServers object, or a file; mistakes name the variable; secrets masked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bots.config import load_settings, settings_table
from bots.logs import secrets_of
from core.errors import ConfigError

CLAUDE_DESKTOP = {
    "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
        "search": {
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": "Bearer ${SEARCH_KEY}", "X-Team": "bots"},
            "timeout": 20,
            "deny": ["delete_index"],
        },
        "github": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "ghp_secretvalue"}, "disabled": True},
    }
}


@pytest.fixture(autouse=True)
def clean_env(settings_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEARCH_KEY", "sk-live-123456")


def test_a_claude_desktop_file_works_as_it_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(CLAUDE_DESKTOP), encoding="utf-8")
    monkeypatch.setenv("MCP_SERVERS", str(path))
    mcp = load_settings().mcp
    assert [s.name for s in mcp.servers] == ["files", "search", "github"]
    assert [s.name for s in mcp.enabled] == ["files", "search"]
    files, search = mcp.enabled
    assert files.transport == "stdio" and files.args[-1] == "/srv"
    assert search.transport == "http" and search.timeout == 20
    assert search.headers["Authorization"].get_secret_value() == "Bearer sk-live-123456"  # ${SEARCH_KEY}
    assert search.offers("query") and not search.offers("delete_index")


def test_a_json_list_and_an_object_in_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_SERVERS", '[{"name": "a", "command": "a-mcp", "allow": ["x"]}]')
    [a] = load_settings().mcp.servers
    assert a.offers("x") and not a.offers("y")
    monkeypatch.setenv("MCP_SERVERS", json.dumps(CLAUDE_DESKTOP))
    assert len(load_settings().mcp.servers) == 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("not-a-file.json", "MCP_SERVERS='not-a-file.json' is neither JSON nor a file"),
        ("[{", "MCP_SERVERS is not valid JSON"),
        ('[{"name": "a"}]', "server 'a' needs either a command (stdio) or a url (http)"),
        ('[{"name": "a", "command": "x", "url": "http://h/mcp"}]', "needs either a command"),
        ('[{"name": "a", "url": "ftp://h"}]', "url must be http(s)://host/path"),
        ('[{"name": "1a", "command": "x"}]', "must start with a letter"),
        ('[{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]', "a appear more than once"),
        ('[{"name": "a", "command": "x", "headers": {"K": "${NOPE_NOT_SET}"}}]', "${NOPE_NOT_SET}, which is not set"),
        ('[{"name": "a", "command": "x", "comand": "typo"}]', "comand"),
    ],
)
def test_mistakes_name_the_variable(monkeypatch: pytest.MonkeyPatch, value: str, expected: str) -> None:
    monkeypatch.setenv("MCP_SERVERS", value)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert expected in str(exc.value)
    assert "MCP_SERVERS" in str(exc.value)


def test_secrets_in_headers_and_env_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_SERVERS", json.dumps(CLAUDE_DESKTOP))
    settings = load_settings()
    shown = dict((var, value) for var, value, _ in settings_table(settings))["MCP_SERVERS"]
    assert "search (http: https://mcp.example.com/mcp with Authorization: ********, X-Team: bots)" in shown
    assert "github (stdio: gh-mcp with GITHUB_TOKEN=********)" in shown
    assert "sk-live" not in shown and "ghp_" not in shown
    found = secrets_of(settings)
    assert "Bearer sk-live-123456" in found and "ghp_secretvalue" in found  # masked in every log line


def _readme_example() -> str:
    """The example of the MCP how-to guide (docs/how-to/mcp.md, once the README's MCP section)."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "mcp.md").read_text(encoding="utf-8")
    return guide.split("```json", 1)[1].split("```", 1)[0]


def test_the_readme_example_is_a_valid_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEARCH_API_KEY", "k-123")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-456")
    path = tmp_path / "mcp.json"
    path.write_text(_readme_example(), encoding="utf-8")
    monkeypatch.setenv("MCP_SERVERS", str(path))
    demo, search, github = load_settings().mcp.enabled
    assert (demo.command, demo.args) == (".venv/bin/python", ["-m", "tests.mcp.server"])
    assert search.headers["Authorization"].get_secret_value() == "Bearer k-123"
    assert (search.timeout, search.concurrency, search.deny) == (20, 2, ["delete_index"])
    assert github.env["GITHUB_PERSONAL_ACCESS_TOKEN"].get_secret_value() == "ghp-456"
