"""Test-wide guards: no real network (only loopback), and NO_PROXY for loopback HTTP clients."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

pytest_plugins = ("tests.bots_fleet",)  # a real redis-server and bots processes, for the fleet tests of every package

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
os.environ.setdefault("no_proxy", "127.0.0.1,localhost")
# the bots built here answer at once (BOT_QUIET_MS, 0 by default since issue 51, kept 0 should an environment set
# it): the tests of the quiet window set their own
os.environ.setdefault("BOT_QUIET_MS", "0")
for _var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(_var, None)

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _is_local(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode()
    host = str(host)
    if host in _LOCAL_NAMES or host == "":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class RealNetworkCall(RuntimeError):
    """A test tried to reach something outside this machine."""


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
        raise RealNetworkCall(f"test tried to connect to {address!r}; tests use 127.0.0.1 only")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
        raise RealNetworkCall(f"test tried to connect to {address!r}; tests use 127.0.0.1 only")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _is_local(host):
        raise RealNetworkCall(f"test tried to resolve {host!r}; tests use 127.0.0.1 only")
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def _no_real_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", _guarded_getaddrinfo)
    yield


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One real PostgreSQL for the whole session (``tests.postgres_server``); tests take a database each."""
    from tests.postgres_server import PostgresServer

    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def database_url(postgres_server: Any) -> str:
    """The URL of a new, empty database of the session's PostgreSQL."""
    url: str = postgres_server.create_database()
    return url


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put the logging configuration back as it was (for tests that configure logging as ``bots`` does)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    content_level = logging.getLogger("content").level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger("content").setLevel(content_level)
