"""The image's build, as far as a machine without a Docker engine goes: base images pinned by digest, a
.dockerignore that keeps the virtualenv, the data and .env out of the context, the default extras (postgres and
tracing among them), and the Dockerfile's own install steps run here: its ``COPY`` lines into a temporary build
context, its ``requirements_of.py`` step with its default ``EXTRAS``, the hash-checked requirements that step
writes checked to be complete (every dependency of every package it pins, as the installed distributions
declare them, is pinned too: what ``pip install --require-hashes`` would otherwise refuse), and its
``pip install --no-deps .`` resolved offline (``--dry-run``) in that context.

Not covered: downloading the pinned files (their hashes are pip's to check at build time), the runtime stage's
``apt-get`` and user, and the embedded model's step (``EMBEDDED_MODEL=true``)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .manifests import DEPLOY, ROOT

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def steps() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` with continuation lines joined and comments dropped."""
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [
        (w.upper(), rest.strip()) for w, _, rest in (line.strip().partition(" ") for line in joined.splitlines()) if w
    ]


def args() -> dict[str, str]:
    """The ``ARG`` defaults (the last one of a name wins, as in each stage that repeats it)."""
    found = {}
    for word, rest in steps():
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            found[name] = value
    return found


def expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m[1] or m[2], m[0]), text)


def test_every_base_image_is_pinned_by_digest() -> None:
    values = args()
    stages = [expand(rest.split()[0], values) for word, rest in steps() if word == "FROM"]
    assert len(stages) >= 2
    for image in stages:
        assert DIGEST.search(image), f"FROM {image}: not pinned by digest (a tag moves under the same name)"
        assert image.startswith("python:3.11-slim@"), image


def test_dockerignore_keeps_secrets_data_and_caches_out_of_the_context() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    for needed in (".git", ".venv", ".env", "data", "site", "**/__pycache__", ".pytest_cache", ".mypy_cache"):
        assert needed in ignored, f".dockerignore lets {needed} into the build context"
    copied = [rest.split()[:-1] for word, rest in steps() if word == "COPY" and not rest.startswith("--from")]
    for sources in copied:
        for source in sources:
            assert source.split("/")[0] not in ignored, f"COPY {source}: .dockerignore leaves it out"


def test_the_default_extras_hold_the_fleets_memory_and_tracing() -> None:
    extras = args()["EXTRAS"].split(",")
    assert {"discord", "telegram", "redis", "mcp", "postgres", "tracing"} <= set(extras)


def install_step() -> list[str]:
    """The commands of the build stage's RUN that installs the project (``&&``-separated)."""
    run = next(rest for word, rest in steps() if word == "RUN" and "requirements_of.py" in rest and "EXTRAS" in rest)
    return [part.strip() for part in run.split("&&")]


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build context holding what the build stage's COPY lines copy, where they copy it."""
    where = tmp_path_factory.mktemp("context")
    for word, rest in steps():
        if word == "COPY" and not rest.startswith("--from"):
            *sources, target = rest.split()
            for source in sources:
                path = ROOT / source
                if path.is_dir():  # Docker copies a folder's contents to the target
                    shutil.copytree(path, where / target, ignore=IGNORED, dirs_exist_ok=True)
                else:
                    file = where / target / path.name if target.endswith("/") else where / target
                    file.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, file)
    return where


@pytest.fixture(scope="module")
def wanted(context: Path) -> Path:
    """The requirements file the build writes: the Dockerfile's requirements_of.py command, run in ``context``."""
    first = install_step()[0]
    command, _, _ = expand(first, args()).partition(">")
    argv = shlex.split(command)
    assert argv[:2] == ["python", "deploy/requirements_of.py"], first
    done = subprocess.run([sys.executable, *argv[1:]], cwd=context, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    path = context / "wanted.txt"
    path.write_text(done.stdout, encoding="utf-8")
    return path


def pins(path: Path) -> dict[str, str]:
    """The ``name==version`` lines of a hashed requirements file, each checked to carry hashes."""
    found = {}
    for block in re.split(r"\n(?=\S)", path.read_text(encoding="utf-8").strip()):
        pin = block.split("\\", 1)[0].strip()
        name, _, version = pin.partition("==")
        assert version, f"{pin!r}: not pinned"
        assert "--hash=sha256:" in block, f"{pin}: no hash (pip's hash-checking mode refuses it)"
        found[canonicalize_name(name)] = version
    return found


def test_the_build_installs_every_dependency_of_the_extras(wanted: Path) -> None:
    """What ``pip install --require-hashes -r wanted.txt`` needs: every package a pinned one requires (for the extras
    asked of it, on Linux and this Python) is pinned too. The requirements come from the distributions installed
    here from the same lock (their versions are checked to be the pinned ones)."""
    import importlib.metadata as metadata

    pinned = pins(wanted)
    assert {"psycopg", "opentelemetry-sdk", "redis", "discord-py"} <= set(pinned)
    environment = dict(default_environment(), sys_platform="linux", platform_system="Linux")
    todo: list[tuple[str, frozenset[str]]] = [(name, frozenset()) for name in pinned]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in done:
            continue
        done.add((name, extras))
        dist = metadata.distribution(name)
        assert canonicalize_name(dist.version) == canonicalize_name(pinned[name]), (
            f"{name} {dist.version} is installed here, {pinned[name]} pinned: run make install"
        )
        for text in dist.requires or []:
            requirement = Requirement(text)
            wanted_here = requirement.marker is None or any(
                requirement.marker.evaluate({**environment, "extra": extra}) for extra in {"", *extras}
            )
            if not wanted_here:
                continue
            needed = canonicalize_name(requirement.name)
            assert needed in pinned, f"{name} needs {requirement}, which the build does not install"
            todo.append((needed, frozenset(requirement.extras)))


def test_the_project_installs_from_the_build_context(context: Path) -> None:
    """The build's last install step (``pip install --no-deps .``), resolved offline in the copied context: the
    COPY lines bring what building the project needs (pyproject.toml, README.md, the packages)."""
    last = install_step()[-1]
    assert shlex.split(last) == ["pip", "install", "--no-deps", "."], last
    report = context / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index", "--no-build-isolation"]
    done = subprocess.run(
        [*command, "--quiet", "--report", str(report), "."], cwd=context, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (installed,) = json.loads(report.read_text(encoding="utf-8"))["install"]
    assert installed["metadata"]["name"] == "daydreams-bots"
