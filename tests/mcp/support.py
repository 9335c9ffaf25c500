"""Real MCP servers for the tests: ``tests/mcp/server.py`` over stdio (a subprocess the extension starts)
and over Streamable HTTP (a subprocess on 127.0.0.1 that the test starts)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.ports import free_port

__all__ = ("ROOT", "free_port", "http_server", "logged_config", "stdio_config")

ROOT = Path(__file__).resolve().parents[2]


def stdio_config(name: str = "tools", *flags: str, **options: Any) -> dict[str, Any]:
    """An ``MCP_SERVERS`` entry that starts the test server over stdio."""
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "tests.mcp.server", *flags],
        "env": {"PYTHONPATH": str(ROOT)},
        "cwd": str(ROOT),
        **options,
    }


def logged_config(calls: Path) -> dict[str, Any]:
    """``stdio_config()`` of a server that writes each call it gets to ``calls`` (``MCP_TEST_CALL_LOG``)."""
    return stdio_config(env={"PYTHONPATH": str(ROOT), "MCP_TEST_CALL_LOG": str(calls)})


async def _listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


@contextlib.asynccontextmanager
async def http_server(*, port: int | None = None, timeout: float = 20.0) -> AsyncIterator[str]:
    """Run the test server over Streamable HTTP on 127.0.0.1; yields its URL; stops it at the end."""
    port = port or free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.mcp.server",
        "--http",
        str(port),
        cwd=str(ROOT),
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(timeout):
            while not await _listening(port):
                if process.returncode is not None:
                    raise RuntimeError(f"the MCP test server exited with {process.returncode}")
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                async with asyncio.timeout(5):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
