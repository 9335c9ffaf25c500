"""Tools from MCP servers: operators give the bot new abilities through configuration.

``mcp_extension(settings)`` connects to every server of ``MCP_SERVERS`` when the agent starts (a
command over stdio, a URL over Streamable HTTP, through the official ``mcp`` SDK) and offers each
server's tools to the model as actions named ``<server>:<tool>``, with the tool's description and input
JSON Schema as the server wrote them. A server that fails to start or dies is retried with backoff while
the bot keeps answering; its tools are hidden meanwhile and ``/readyz`` says so (``mcp:<server>``).
Every process that runs the agent (``bots run``, each ``bots worker``) holds its own sessions. Importing
this package needs no SDK; building the extension does (``pip install 'daydreams-bots[mcp]'``).
"""

from __future__ import annotations

import typing

from .settings import McpServerConfig, McpSettings, parse_servers

if typing.TYPE_CHECKING:
    from core.definitions import Extension

    from .toolset import McpToolset

__all__ = ("McpServerConfig", "McpSettings", "mcp_extension", "mcp_toolset", "parse_servers")


def mcp_toolset(settings: McpSettings) -> McpToolset:
    """The servers of ``settings`` with their sessions (``mcp_extension`` builds one for you)."""
    try:
        from .toolset import McpToolset
    except ImportError as exc:  # the optional extra is missing
        from core.errors import ConfigError

        raise ConfigError(
            "MCP_SERVERS is set but the MCP SDK is not installed: pip install 'daydreams-bots[mcp]', "
            "or unset MCP_SERVERS"
        ) from exc
    return McpToolset(settings)


def mcp_extension(settings: McpSettings) -> Extension:
    """The MCP extension: the tools of the servers in ``settings`` as actions."""
    return mcp_toolset(settings).extension()
