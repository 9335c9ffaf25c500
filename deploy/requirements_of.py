"""The part of ``requirements/lock.txt`` that the project and the extras named need, as a requirements file: each
package at its locked version with its hashes, so pip installs it in hash-checking mode, whatever pip the image has
(an extra naming the project's own extras, ``all``, is expanded). What the Dockerfile installs::

    python deploy/requirements_of.py discord,telegram,redis,mcp > wanted.txt
    pip install --require-hashes -r wanted.txt && pip install --no-deps .

The packages needed are those ``pyproject.toml`` asks for, then, again and again, every package the lock says one
of them needs (its ``# via`` lines, as ``make lock`` writes them); pip itself refuses a dependency left out.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LOCK = ROOT / "requirements" / "lock.txt"


def canonical(name: str) -> str:
    """A package's name as pip compares them (``discord.py`` -> ``discord-py``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _name(requirement: str) -> str:
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if found is None:
        raise SystemExit(f"{requirement!r} is not a requirement")
    return found.group(1)


def requirements_of(extras: list[str], pyproject: Path = PYPROJECT) -> list[str]:
    """The project's dependencies and those of ``extras``, as ``pyproject.toml`` states them, in order, each once."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    name = canonical(project["name"])
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    found: list[str] = []
    seen: set[str] = set()

    def add(requirement: str) -> None:
        own = re.fullmatch(rf"{re.escape(name)}\[([^\]]*)\]", canonical(requirement.strip()))
        if own is not None:
            for extra in own.group(1).split(","):
                expand(extra.strip())
        elif requirement not in found:
            found.append(requirement)

    def expand(extra: str) -> None:
        if extra in seen:
            return
        if extra not in optional:
            raise SystemExit(f"no extra {extra!r} in {pyproject}: choose among {', '.join(sorted(optional))}")
        seen.add(extra)
        for requirement in optional[extra]:
            add(requirement)

    for requirement in project.get("dependencies", []):
        add(requirement)
    for extra in extras:
        if extra.strip():
            expand(extra.strip())
    return found


def locked(lock: Path = LOCK) -> dict[str, tuple[str, set[str]]]:
    """The lock's entries by canonical name: its text (the pin and its hashes) and the packages that need it."""
    entries: dict[str, tuple[str, set[str]]] = {}
    for block in re.split(r"\n(?=\S)", lock.read_text(encoding="utf-8")):
        if not block.strip() or block.startswith("#"):
            continue
        pin = block.split("\\", 1)[0].strip()
        if "==" not in pin:
            raise SystemExit(f"{lock}: {pin!r} is not pinned with ==; run make lock")
        comments = [line.strip().lstrip("#").strip() for line in block.splitlines() if line.strip().startswith("#")]
        parents = {canonical(_name(c.removeprefix("via").strip())) for c in comments if c.removeprefix("via").strip()}
        text = "\n".join(line for line in block.splitlines() if not line.strip().startswith("#")).rstrip(" \\\n")
        entries[canonical(pin.partition("==")[0])] = (text, parents)
    return entries


def needed(extras: list[str], lock: Path = LOCK) -> list[str]:
    """The lock's entries the project and ``extras`` need, in the lock's order."""
    entries = locked(lock)
    wanted = {canonical(_name(requirement)) for requirement in requirements_of(extras)}
    missing = wanted - entries.keys()
    if missing:
        raise SystemExit(f"{', '.join(sorted(missing))} not in {lock}: run make lock")
    grown = True
    while grown:
        grown = False
        for name, (_text, parents) in entries.items():
            if name not in wanted and parents & wanted:
                wanted.add(name)
                grown = True
    return [text for name, (text, _parents) in entries.items() if name in wanted]


if __name__ == "__main__":
    print("\n".join(needed(",".join(sys.argv[1:]).split(","))))
