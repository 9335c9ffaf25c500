"""An operator can tell which version runs and what changed: ``bots --version`` reads the package's metadata (the
version in pyproject.toml), and CHANGELOG.md has a section for it and one for what is not released yet."""

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
    assert (declared, headings[1][1]) in headings and headings[1][1], "the released version has its dated section"
    for section in re.split(r"^## ", changelog, flags=re.M)[1:]:  # keep-a-changelog's kinds of change only
        kinds = re.findall(r"^### (.+)$", section, re.M)
        assert set(kinds) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
