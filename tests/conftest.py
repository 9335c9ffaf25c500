"""Test-wide guards: no real network (only loopback), and NO_PROXY for loopback HTTP clients."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ("tests.bots_fleet",)  # a real redis-server and bots processes, for the fleet tests of every package

if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    # The suite starts hundreds of Python processes (its xdist workers, every `bots` program it runs) importing the
    # same modules: without compiled modules kept, each compiles them again (about half a second of CPU for a
    # `bots` process, and each worker rewrites every test module's asserts). Where PYTHONDONTWRITEBYTECODE is set
    # (Docker images, this sandbox) they are kept anyway, outside the checkout: in PYTHONPYCACHEPREFIX's folder.
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "bots-tests-pycache"))
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
    sys.dont_write_bytecode = False
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
os.environ.setdefault("no_proxy", "127.0.0.1,localhost")
# the bots built here answer at once (BOT_QUIET_MS, 0 by default since issue 51, kept 0 should an environment set
# it): the tests of the quiet window set their own
os.environ.setdefault("BOT_QUIET_MS", "0")
for _var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(_var, None)

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}

LONG_TESTS = {
    "tests/gate/test_gate.py::test_bots_run_with_the_embedded_model_answers_on": 300.0,
    "tests/gate/test_matrix.py::test_the_cell_holds_the_conversation[telegram-embedded": 165.0,
    "tests/gate/test_gate.py::test_a_gateway_and_two_workers_with_the_embedded_model": 165.0,
    "tests/gate/test_matrix.py::test_the_cell_holds_the_conversation[terminal-embedded": 80.0,
    "tests/models/test_tool_calls.py": 75.0,
    "tests/fleet/test_fault_matrix.py::test_the_fleet_through_a_fault[primary-back-15s]": 75.0,
    "tests/gate/test_matrix.py::test_the_cell_holds_the_conversation[discord-embedded": 70.0,
    "tests/gate/test_matrix.py::test_the_cell_holds_the_conversation[web-embedded": 65.0,
    "tests/catchup/test_catchup.py::test_on_the_embedded_model": 58.0,
    "tests/gate/test_privacy.py::test_two_people": 50.0,
    "tests/docs/test_site.py": 50.0,
    "tests/framework/test_typing.py": 45.0,
    "tests/fleet/test_e2e_primary_back.py::": 44.0,
    "tests/docs/test_documented_calls.py::test_every_shown_call": 44.0,
    "tests/fleet/test_netfaults.py::": 40.0,
    "tests/fleet/test_fault_matrix.py::": 40.0,
    "tests/fleet/test_e2e_failover.py::": 40.0,
    "tests/gate/test_gate.py::": 35.0,
    "tests/fleet/test_e2e_fleet.py::": 30.0,
    "tests/tracing/test_fleet.py::test_one_message_is_one_trace": 30.0,
    "tests/gate/test_matrix.py::test_the_cell_holds_the_conversation[": 25.0,
    "tests/fleet/test_redis_budget.py::": 20.0,
    "tests/apps/test_examples_as_apps.py::": 20.0,
    "tests/deploy/test_redis_empty_primary.py::": 18.0,
}
"""Tests that take minutes (they load the embedded model, live through a fleet's faults, or run mypy), and about
how many seconds each took in a whole run of the suite on 4 workers on a busy 2-core machine (the last: 2026-11-29,
load 9-16 from other work, 22 min in all, the embedded model's warm slots kept on disk): test ids start with these
keys, the first that matches counts. A key that names a module without ``::`` keeps the module's tests together
(its fixtures are the module's or the session's: the embedded model, mypy's cache, the built site), and its figure
is the whole module's. See ``pytest_collection_modifyitems``."""


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller tells each worker the ``--dist`` mode (a worker's own options say ``no``)."""
    node.workerinput["dist"] = node.config.getoption("dist")


@pytest.hookimpl(trylast=True)  # (after pytest-randomly's shuffle, when it is on)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tests (``LONG_TESTS``) start first and the short ones fill in around them: the suite lasts as long
    as its busiest worker, and a long test left for the end runs alone after everything else.

    With xdist's ``worksteal`` (``--dist worksteal``, in pyproject's addopts) each of the N workers is first given
    one contiguous share of the collection, and a worker with nothing left takes the second half of the longest
    share. So the long tests are dealt to the starts of the shares, longest first, each to the share with the
    fewest seconds dealt so far, and the short ones fill each share to the size the scheduler gives it. Elsewhere
    (one process, or another ``--dist``) they only come first."""
    keys = list(LONG_TESTS)

    def key_of(item: pytest.Item) -> str | None:
        return next((k for k in keys if item.nodeid.startswith(k)), None)

    def rank(item: pytest.Item) -> int:
        key = key_of(item)
        return len(keys) if key is None else keys.index(key)

    items.sort(key=rank)  # (stable: the order within a rank is kept)
    given = getattr(config, "workerinput", {})  # (on an xdist worker: what the controller says of the run)
    workers = int(given.get("workercount", 0))
    if workers < 2 or given.get("dist") != "worksteal":
        return
    units: dict[str, list[pytest.Item]] = {}  # a test, or a module whose tests stay together
    for item in items:
        key = key_of(item)
        if key is not None:
            units.setdefault(item.nodeid if "::" in key else item.nodeid.split("::")[0], []).append(item)
    short = [item for item in items if key_of(item) is None]
    sizes, left = [], len(items)
    for i in range(workers):  # (as xdist's WorkStealingScheduling deals the first shares)
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    dealt: list[list[pytest.Item]] = [[] for _ in range(workers)]
    seconds = [0.0] * workers

    def cost(unit: list[pytest.Item]) -> float:
        key = key_of(unit[0]) or ""
        return LONG_TESTS[key] * (len(unit) if "::" in key else 1)

    for unit in sorted(units.values(), key=cost, reverse=True):
        i = min(range(workers), key=lambda w: seconds[w])
        dealt[i] += unit
        seconds[i] += cost(unit)
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
