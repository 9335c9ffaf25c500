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

LONGEST_FIRST = (
    "tests/gate/test_gate.py::test_a_gateway_and_two_workers_with_the_embedded_model",
    "tests/gate/test_gate.py::test_bots_run_with_the_embedded_model",
    "tests/gate/test_matrix.py::test_the_cell_holds_the_conversation[",
    "tests/gate/",
    "tests/fleet/test_fault_matrix.py",
)
"""Tests that take minutes (each loads the embedded model, or lives through a fleet's faults), longest first: their
test ids start with these. See ``pytest_collection_modifyitems``."""


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller tells each worker the ``--dist`` mode (a worker's own options say ``no``)."""
    node.workerinput["dist"] = node.config.getoption("dist")


@pytest.hookimpl(trylast=True)  # (after pytest-randomly's shuffle, when it is on)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tests start first, one worker each in turn, and the short ones fill in around them: the suite
    lasts as long as its busiest worker, and a long test left for the end runs alone after everything else.

    With xdist's ``worksteal`` (``--dist worksteal``, in pyproject's addopts) each of the N workers is first given
    one contiguous share of the collection, and a worker with nothing left takes the second half of the longest
    share: so the long tests are dealt round-robin to the starts of the shares, and the short ones fill each share
    to the size the scheduler gives it. Elsewhere (one process, or another ``--dist``) they only come first."""

    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))

    items.sort(key=rank)  # (stable: the order within a rank is kept)
    given = getattr(config, "workerinput", {})  # (on an xdist worker: what the controller says of the run)
    workers = int(given.get("workercount", 0))
    if workers < 2 or given.get("dist") != "worksteal":
        return
    cut = next((i for i, item in enumerate(items) if rank(item) == len(LONGEST_FIRST)), len(items))
    long, short = items[:cut], items[cut:]
    sizes, left = [], len(items)
    for i in range(workers):  # (as xdist's WorkStealingScheduling deals the first shares)
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    dealt = [long[i::workers] for i in range(workers)]
    if any(len(mine) > size for mine, size in zip(dealt, sizes, strict=True)):
        return  # (a few tests only: the long ones first is all there is to do)
    ordered: list[pytest.Item] = []
    for mine, size in zip(dealt, sizes, strict=True):
        ordered += mine + short[: size - len(mine)]
        short = short[size - len(mine) :]
    items[:] = ordered


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
