"""Secrets written in a URL's query string are masked wherever secrets are: what shows a URL (``bots config``'s
table, the MCP server's line, model and Redis errors) and every log line."""

from __future__ import annotations

import io
import json
import logging

import pytest

from bots.config import load_settings, safe_url, settings_table
from bots.logs import configure_from_settings, secrets_of
from core.fleet import redact_url
from core.models.retry import safe_url as model_url
from core.url_secrets import mask_query, query_secrets
from extensions.mcp import McpServerConfig

LLM_URL = "https://x.example/v1?api-key=llm-query-key-value&api-version=2024-06-01"
MCP_URL = "https://tools.example/mcp?token=mcp-query-token-value"


def test_query_values_are_masked_names_kept() -> None:
    assert mask_query(LLM_URL) == "https://x.example/v1?api-key=********&api-version=********"
    assert mask_query("https://x.example/v1") == "https://x.example/v1"
    assert mask_query("https://x.example/v1?flag&k=") == "https://x.example/v1?flag&k=********"
    assert safe_url("redis://:pw@redis:6379/0?password=other") == "redis://:********@redis:6379/0?password=********"
    assert model_url("https://bob:hunter2@x.example/v1?key=k") == "https://x.example/v1?key=********"
    assert redact_url("redis://redis:6379/0?password=query-pw") == "redis://redis:6379/0?password=********"
    shown = McpServerConfig(name="tools", url=MCP_URL).describe()
    assert "mcp-query-token-value" not in shown and "?token=********" in shown


def test_query_secrets_are_the_secret_sounding_and_the_opaque_values() -> None:
    assert query_secrets(LLM_URL) == ["llm-query-key-value"]  # api-version is no secret: logs keep the date
    assert sorted(query_secrets("https://x/?sig=a%2Bb%3D&v=2&blob=0123456789abcdef0")) == [
        "0123456789abcdef0",
        "a%2Bb%3D",
        "a+b=",
    ]
    assert query_secrets("not a url") == []


@pytest.mark.usefixtures("restore_logging")
def test_secrets_in_url_query_strings_are_masked_in_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_BASE_URL", LLM_URL)
    monkeypatch.setenv("MCP_SERVERS", json.dumps([{"name": "tools", "url": MCP_URL}]))
    settings = load_settings(_env_file=None)
    assert {"llm-query-key-value", "mcp-query-token-value"} <= set(secrets_of(settings))
    stream = io.StringIO()
    configure_from_settings(settings, stream=stream)
    logging.getLogger("core.models").warning("the server at %s refused: HTTP 500", LLM_URL)
    logging.getLogger("extensions.mcp").warning("MCP server %s is down", MCP_URL)
    written = stream.getvalue()
    assert "llm-query-key-value" not in written and "mcp-query-token-value" not in written
    assert "api-version=2024-06-01" in written  # not a secret: left alone
    table = dict((var, shown) for var, shown, _source in settings_table(settings))
    assert table["LLM_BASE_URL"] == "https://x.example/v1?api-key=********&api-version=********"
    assert "mcp-query-token-value" not in table["MCP_SERVERS"]
