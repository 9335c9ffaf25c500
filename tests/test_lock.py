"""requirements/lock.txt keeps up with pyproject.toml (issue 35): every requirement of the project and of its extras
``all`` and ``dev`` is pinned there to one version it allows, each pin carries hashes, and nothing points at a
folder or a machine; ``make install`` and the Dockerfile install from it (``make lock`` writes it)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"

sys.path.insert(0, str(ROOT / "deploy"))
from requirements_of import needed, requirements_of  # noqa: E402


def _pins() -> dict[str, tuple[str, list[str]]]:
    """The lock's pins: name -> (version, hashes)."""
    text = LOCK.read_text(encoding="utf-8")
    pins: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=\S)", text):
        first = block.split("\\", 1)[0].strip()
        if not first or first.startswith("#"):
            continue
        name, _, version = first.partition("==")
        assert version, f"requirements/lock.txt: {first!r} is not pinned with =="
        pins[canonicalize_name(name)] = (version.strip(), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return pins


def test_every_requirement_of_pyproject_is_pinned_in_the_lock() -> None:
    pins = _pins()
    stale = []
    for line in requirements_of(["all", "dev"]):
        requirement = Requirement(line)
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is None or not requirement.specifier.contains(pinned[0], prereleases=True):
            stale.append(f"{line} (locked: {pinned[0] if pinned else 'missing'})")
    assert not stale, "requirements/lock.txt is stale: run make lock; " + "; ".join(stale)


def test_every_pin_of_the_lock_has_hashes_and_no_local_source() -> None:
    pins = _pins()
    assert len(pins) > 50
    assert all(hashes for _version, hashes in pins.values()), [n for n, (_v, h) in pins.items() if not h]
    text = LOCK.read_text(encoding="utf-8")
    assert "file:" not in text and "--index-url" not in text and "--find-links" not in text
    assert "daydreams-bots==" not in text and "daydreams-bots @" not in text  # the project installs with --no-deps


def test_the_requirements_of_extras_expand_the_project_s_own_extras() -> None:
    wanted = requirements_of(["all"])
    assert "discord.py>=2.4,<3" in wanted and "xllamacpp>=0.2" in wanted and "pydantic>=2.7,<3" in wanted
    assert not any(line.lower().startswith("daydreams-bots") for line in wanted)
    assert requirements_of(["dev"]) != requirements_of([])  # dev names the docs extra: expanded too


def test_the_image_installs_the_part_of_the_lock_its_extras_need() -> None:
    wanted = {entry.split("==")[0] for entry in needed(["discord", "telegram", "redis", "mcp"])}
    assert {"discord-py", "python-telegram-bot", "arq", "redis", "mcp", "pydantic", "aiohttp"} <= wanted
    assert {"pydantic-core", "multidict", "yarl", "hiredis"} <= wanted  # what those need, and what that needs
    assert not {"pytest", "mypy", "selenium", "mkdocs", "xllamacpp", "psycopg"} & wanted
    assert all("--hash=sha256:" in entry for entry in needed(["local"]))
