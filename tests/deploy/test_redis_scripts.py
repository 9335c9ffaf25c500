"""The scripts that start Redis in ``deploy/k8s/redis.yaml`` and ``deploy/compose.yaml``, run here with the real
redis-server on a free loopback port (the container's names and folders stood in for by a few shell shims): Redis
asks for the password and takes it, has maxmemory and noeviction (a full Redis refuses a write instead of dropping
a key), keeps its AOF, and the password's file is its user's only. The sentinel's script of
``deploy/k8s/sentinel.yaml`` too: it watches that Redis with the password, asks for it, and the bots' settings
(``REDIS_PASSWORD``, ``REDIS_SENTINEL_PASSWORD``) reach Redis through it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from tests.fleet.server import free_port

from .manifests import DEPLOY, K8S, load_yaml

PASSWORD = "0123456789abcdef0123456789abcdef"


def k8s_script(conf: Path) -> str:
    redis_set = next(m for m in load_yaml(K8S / "redis.yaml") if m["kind"] == "StatefulSet")
    server = redis_set["spec"]["template"]["spec"]["containers"][0]
    assert server["command"] == ["sh"] and server["args"][0] == "-c"
    return str(server["args"][1]).replace("/conf/", f"{conf}/")


def compose_script(conf: Path) -> str:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))["services"]
    command = services["redis"]["command"]
    assert command[:2] == ["sh", "-c"]
    return str(command[2]).replace("$$", "$").replace("/tmp/auth.conf", f"{conf}/auth.conf")


def shims(folder: Path, port: int, data: Path, *, host: str = "redis-0") -> Path:
    """``hostname`` (``host``), ``redis-cli`` (no sentinel answers: the first start), and ``redis-server`` on
    ``port`` with its files in ``data``."""
    real = shutil.which("redis-server")
    if real is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    folder.mkdir()
    scripts = {
        "hostname": f"#!/bin/sh\necho {host}\n",
        "redis-cli": "#!/bin/sh\nexit 1\n",
        "redis-server": f'#!/bin/sh\nexec {real} "$@" --port {port} --bind 127.0.0.1 --dir {data} --save ""\n',
    }
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


@contextlib.contextmanager
def running(script: str, *, port: int, bin_dir: Path, what: str) -> Iterator[None]:
    """``script`` run by sh until it answers (with the password) on ``port``; stopped after."""
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "REDIS_PASSWORD": PASSWORD, "HOME": str(bin_dir)}
    process = subprocess.Popen(["sh", "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        client = redis.Redis(port=port, password=PASSWORD, socket_timeout=2)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    out = process.stdout.read().decode() if process.stdout else ""
                    pytest.fail(f"{what} did not start: {out}")
                time.sleep(0.05)
        client.close()
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


@pytest.fixture(params=["k8s", "compose"])
def started(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    conf, data = tmp_path / "conf", tmp_path / "data"
    conf.mkdir()
    data.mkdir()
    port = free_port()
    # the first start's primary: redis-0 of the StatefulSet, compose's redis
    bin_dir = shims(tmp_path / "bin", port, data, host="redis-0" if request.param == "k8s" else "redis")
    script = k8s_script(conf) if request.param == "k8s" else compose_script(conf)
    with running(script, port=port, bin_dir=bin_dir, what=f"Redis from the {request.param} script"):
        yield port, conf


def test_an_empty_password_stops_the_k8s_script(tmp_path: Path) -> None:
    bin_dir = shims(tmp_path / "bin", free_port(), tmp_path)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "REDIS_PASSWORD": ""}
    done = subprocess.run(["sh", "-c", k8s_script(tmp_path)], env=env, capture_output=True, text=True, timeout=10)
    assert done.returncode != 0 and "REDIS_PASSWORD is empty" in done.stderr


def test_redis_asks_for_the_password_and_refuses_writes_when_full(started: tuple[int, Path]) -> None:
    port, conf = started
    with redis.Redis(port=port, socket_timeout=2) as anonymous, pytest.raises(redis.AuthenticationError):
        anonymous.ping()
    with redis.Redis(port=port, password=PASSWORD, socket_timeout=2, decode_responses=True) as client:
        config = client.config_get("*")
        assert int(config["maxmemory"]) == 384 * 1024 * 1024
        assert config["maxmemory-policy"] == "noeviction"
        assert config["appendonly"] == "yes"
        assert config["masterauth"] == PASSWORD  # a replica's, to follow its primary
        client.config_set("maxmemory", str(4 * 1024 * 1024))  # a small Redis, to fill it here
        with pytest.raises(redis.exceptions.OutOfMemoryError):  # "OOM command not allowed"
            for n in range(200):
                client.set(f"k{n}", "x" * 100_000)
        assert client.exists("k0"), "a full Redis dropped a key"
    mode = stat.S_IMODE((conf / "auth.conf").stat().st_mode)
    assert mode == 0o600, f"the password's file is {oct(mode)}"


def sentinel_script(conf: Path, *, port: int, primary: int) -> str:
    """The sentinel's script, watching the primary on ``primary`` and listening on ``port``."""
    sentinels = next(m for m in load_yaml(K8S / "sentinel.yaml") if m["kind"] == "StatefulSet")
    script = str(sentinels["spec"]["template"]["spec"]["containers"][0]["args"][1])
    for old, new in (
        ("/data/sentinel.conf", f"{conf}/sentinel.conf"),
        ("${PRIMARY:-redis-0.redis} 6379 2", f"${{PRIMARY:-127.0.0.1}} {primary} 1"),  # one sentinel here: quorum 1
        ("port 26379", f"port {port}"),
    ):
        assert old in script, old
        script = script.replace(old, new)
    return script


async def test_the_bots_reach_redis_through_a_sentinel_with_the_password(tmp_path: Path) -> None:
    from bots.queue_settings import RedisSettings
    from core.fleet.backend import close_client, make_client

    data, conf = tmp_path / "data", tmp_path / "conf"
    data.mkdir()
    conf.mkdir()
    port, sentinel_port = free_port(), free_port()
    server_bin = shims(tmp_path / "bin", port, data)
    sentinel_bin = shims(tmp_path / "sbin", sentinel_port, conf, host="redis-sentinel-0")
    with (
        running(k8s_script(conf), port=port, bin_dir=server_bin, what="Redis"),
        running(sentinel_script(conf, port=sentinel_port, primary=port), port=sentinel_port, bin_dir=sentinel_bin,
                what="the sentinel"),
    ):  # fmt: skip
        with redis.Redis(port=sentinel_port, socket_timeout=2) as anonymous, pytest.raises(redis.AuthenticationError):
            anonymous.ping()
        settings = RedisSettings(
            url="redis://redis:6379/0",  # with sentinels, the host is the sentinels' answer
            sentinels=f"127.0.0.1:{sentinel_port}",
            sentinel_master="bots",
            password=PASSWORD,
            sentinel_password=PASSWORD,
        )
        client = make_client(settings.to_config())
        try:
            assert await client.set("deploy-test", "1")
            assert await client.get("deploy-test") == "1"
        finally:
            await close_client(client)
        with redis.Redis(port=sentinel_port, password=PASSWORD, socket_timeout=2, decode_responses=True) as sentinel:
            deadline = time.monotonic() + 10
            while True:  # the sentinel logs in to the primary with auth-pass: it sees it up, not disconnected
                flags = sentinel.execute_command("SENTINEL", "MASTER", "bots")
                state = dict(zip(flags[::2], flags[1::2], strict=True))
                if state["flags"] == "master" and int(state["link-pending-commands"]) == 0:
                    break
                assert time.monotonic() < deadline, state
                await asyncio.sleep(0.1)
        mode = stat.S_IMODE((conf / "sentinel.conf").stat().st_mode)
        assert mode == 0o600, f"the sentinel's configuration holds the password and is {oct(mode)}"
