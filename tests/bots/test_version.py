"""An operator can tell which version runs and what changed: ``bots --version`` reads the package's metadata (the
version in pyproject.toml), and CHANGELOG.md has a section for it and one for what is not released yet. The version
is the release's (issue 47): the latest released section's version when nothing is unreleased, else a development
version of the next one (``0.2.0.dev0``), never the last release's number on code that has changed since."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bots_version_is_the_package_version_and_the_changelog_has_its_section() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version("daydreams-bots") == declared
    done = subprocess.run(
        [sys.executable, "-m", "bots.cli", "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == f"bots {declared}"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.M)
    assert headings[0] == ("Unreleased", "")
    released = headings[1][0]  # the latest release: its own section, or the one a development version follows
    assert headings[1][1], "the released version has its dated section"
    assert declared == released or declared.startswith(tuple(f"{n}.dev" for n in _after(released))), declared
    for section in re.split(r"^## ", changelog, flags=re.M)[1:]:  # keep-a-changelog's kinds of change only
        kinds = re.findall(r"^### (.+)$", section, re.M)
        assert set(kinds) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds


def test_bots_version_is_the_release_or_a_development_version_after_it() -> None:
    from packaging.version import Version

    declared = Version(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
    changelog = (ROOT / "CHANGELOG.md").read_text()
    sections = re.split(r"^## ", changelog, flags=re.M)[1:]
    unreleased = next(s for s in sections if s.startswith("[Unreleased]"))
    released = [Version(m) for m in re.findall(r"^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)]
    latest = max(released)
    if re.search(r"^- ", unreleased, re.M):  # changes since the latest release: a development version after it
        assert declared.is_devrelease and declared > latest, (declared, latest)
    else:
        assert declared == latest


def _after(released: str) -> list[str]:
    """The versions that may follow ``released``: the next patch, minor or major."""
    major, minor, patch = (int(p) for p in released.split(".")[:3])
    return [f"{major}.{minor}.{patch + 1}", f"{major}.{minor + 1}.0", f"{major + 1}.0.0"]


def test_bots_version_answers_without_importing_the_framework() -> None:
    """The console script (bots.entry) prints the version from the package metadata alone (issue 47: it took 1.1 s
    importing everything first); every other command goes to bots.cli.main."""
    script = (
        "import sys; from bots.entry import main; code = main(['--version']); "
        "print(sorted(m for m in sys.modules if m == 'core' or m.startswith(('core.', 'bots.cli', 'aiohttp'))))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    printed, imported = done.stdout.strip().splitlines()
    assert printed == f"bots {version('daydreams-bots')}"
    assert imported == "[]"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["bots"] == "bots.entry:main"
