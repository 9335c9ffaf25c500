"""Operator settings of the MCP extension (``MCP_*``). Importing this needs no MCP SDK.

``MCP_SERVERS`` is a JSON list of servers, a JSON object in the common ``{"mcpServers": {...}}`` shape
(Claude Desktop, Cursor, VS Code), or the path of a JSON file holding either. A server is a command
(stdio) or a URL (Streamable HTTP)::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
        "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${SEARCH_KEY}"},
                   "timeout": 20, "deny": ["delete_index"]}
    }}

``${NAME}`` in an ``env`` or ``headers`` value is replaced by the environment variable ``NAME``, so
secrets need not be written in the file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from core.url_secrets import mask_query

__all__ = ("McpServerConfig", "McpSettings", "parse_servers")

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,39}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_WORDS = ("auth", "token", "key", "secret", "password", "cookie")


def _expand(value: str, *, where: str) -> str:
    def swap(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ValueError(f"MCP_SERVERS: {where} refers to ${{{name}}}, which is not set in the environment")
        return os.environ[name]

    return _VAR.sub(swap, value)


class McpServerConfig(BaseModel):
    """One MCP server: a command to run (stdio) or a URL (Streamable HTTP)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(description="Short name; its tools are offered as <name>:<tool>")
    command: str | None = Field(default=None, description="The program to start (stdio)")
    args: list[str] = Field(default_factory=list, description="Its arguments")
    env: dict[str, SecretStr] = Field(default_factory=dict, description="Extra environment of the program")
    cwd: str | None = Field(default=None, description="Its working directory")
    url: str | None = Field(default=None, description="The endpoint of a Streamable HTTP server")
    headers: dict[str, SecretStr] = Field(default_factory=dict, description="HTTP headers sent with every request")
    type: Literal["stdio", "http", "streamable-http", "streamableHttp"] | None = Field(
        default=None, description="stdio or http (default: from command or url)"
    )
    timeout: float | None = Field(default=None, gt=0, description="Seconds one tool call may take (MCP_TIMEOUT)")
    concurrency: int | None = Field(default=None, ge=1, description="Tool calls at once at most (MCP_CONCURRENCY)")
    connect_timeout: float | None = Field(
        default=None, gt=0, description="Seconds to start and answer initialize (MCP_CONNECT_TIMEOUT)"
    )
    allow: list[str] | None = Field(default=None, description="Offer only these tools (default: all)")
    deny: list[str] = Field(default_factory=list, description="Never offer these tools")
    required: bool = Field(default=False, description="/readyz fails while this server is down")
    disabled: bool = Field(default=False, description="Leave the server out")
    auto_approve: Any = Field(default=None, alias="autoApprove", exclude=True, description="Ignored (other clients)")

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"MCP_SERVERS: server name {value!r} must start with a letter and hold at most 40 letters, "
                "digits, '_' or '-'"
            )
        return value

    @model_validator(mode="after")
    def _check_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP_SERVERS: server {self.name!r} needs either a command (stdio) or a url (http)")
        if self.type == "stdio" and self.command is None:
            raise ValueError(f"MCP_SERVERS: server {self.name!r} is type stdio but has no command")
        if self.type not in (None, "stdio") and self.url is None:
            raise ValueError(f"MCP_SERVERS: server {self.name!r} is type {self.type} but has no url")
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(
                    f"MCP_SERVERS: server {self.name!r}: url must be http(s)://host/path (Streamable HTTP); "
                    "SSE-only servers are not supported"
                )
        where = f"server {self.name!r}"
        self.env = {k: SecretStr(_expand(v.get_secret_value(), where=f"{where} env {k}")) for k, v in self.env.items()}
        self.headers = {
            k: SecretStr(_expand(v.get_secret_value(), where=f"{where} header {k}")) for k, v in self.headers.items()
        }
        return self

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command is not None else "http"

    def offers(self, tool: str) -> bool:
        """Whether the allow and deny lists let ``tool`` through."""
        return (self.allow is None or tool in self.allow) and tool not in self.deny

    def describe(self) -> str:
        """One line for logs and ``bots config``: where the server is, secrets masked."""
        if self.command is not None:
            env = " ".join(f"{k}=********" for k in self.env)
            return f"{self.name} (stdio: {' '.join([self.command, *self.args])}{' with ' + env if env else ''})"
        headers = ", ".join(f"{k}: {_masked_header(k, v)}" for k, v in self.headers.items())
        return f"{self.name} (http: {_safe_url(self.url or '')}{' with ' + headers if headers else ''})"

    def __str__(self) -> str:
        return self.describe()


def _masked_header(name: str, value: SecretStr) -> str:
    if any(word in name.lower() for word in _SECRET_WORDS):
        return "********"
    return value.get_secret_value()


def _safe_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        url = url.replace(f":{parts.password}@", ":********@", 1)
    return mask_query(url)  # ?token=... too


def parse_servers(value: Any) -> list[dict[str, Any]]:
    """The servers of ``MCP_SERVERS`` (JSON text, a file path, or already parsed) as a list of mappings,
    each with its ``name``."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text[0] not in "[{":
            path = Path(text).expanduser()
            if not path.is_file():
                raise ValueError(
                    f"MCP_SERVERS={text!r} is neither JSON nor a file: give a JSON list of servers or the path "
                    'of a JSON file like {"mcpServers": {"name": {"command": "..."}}}'
                )
            text = path.read_text(encoding="utf-8")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"MCP_SERVERS is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(value, dict):
        servers = value.get("mcpServers", value.get("servers", value))
        if not isinstance(servers, dict):
            raise ValueError('MCP_SERVERS: "mcpServers" must map server names to their settings')
        items = []
        for name, config in servers.items():
            if not isinstance(config, dict):
                raise ValueError(f"MCP_SERVERS: server {name!r} must be a JSON object")
            items.append({"name": name, **config})
        return items
    if isinstance(value, list):
        return list(value)
    raise ValueError("MCP_SERVERS must be a JSON list of servers, an mcpServers object, or a file path")


class McpSettings(BaseModel):
    """``MCP_*`` environment variables."""

    servers: Annotated[list[McpServerConfig], NoDecode] = Field(
        default_factory=list,
        description='MCP servers whose tools the bot may use: a JSON list, an {"mcpServers": {...}} object, '
        "or the path of such a JSON file (see MCP tools)",
    )
    timeout: float = Field(default=30.0, gt=0, le=3600, description="Seconds one MCP tool call may take at most")
    concurrency: int = Field(default=4, ge=1, le=256, description="Tool calls at once at most, per MCP server")
    connect_timeout: float = Field(
        default=15.0, gt=0, le=600, description="Seconds an MCP server may take to start and answer initialize"
    )
    retry_max: float = Field(
        default=60.0,
        ge=1,
        le=3600,
        description="Seconds at most between two attempts to reach an MCP server that is down",
    )
    check_interval: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="Seconds between checks that each MCP server still answers (listing its tools; 0: never)",
    )

    @field_validator("servers", mode="before")
    @classmethod
    def _parse(cls, value: Any) -> Any:
        return parse_servers(value)

    @model_validator(mode="after")
    def _unique(self) -> McpSettings:
        names = [s.name for s in self.servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"MCP_SERVERS: server names must be unique; {', '.join(dupes)} appear more than once")
        return self

    @property
    def enabled(self) -> list[McpServerConfig]:
        """The servers not ``disabled``."""
        return [s for s in self.servers if not s.disabled]
