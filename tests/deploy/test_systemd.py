"""The systemd units are hardened (``systemd-analyze security --offline=yes``: exposure under 3) and still let the
bot do its work: write its state directory, reach the network (the platforms, the model, Redis)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .manifests import DEPLOY

UNITS = {"bots.service": "bots.service", "bots@.service": "bots@worker.service"}
"""Each unit file and the name it is analysed under (a template needs an instance)."""
MAX_EXPOSURE = 3.0


def entries(name: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


@pytest.mark.parametrize("name", UNITS)
def test_the_unit_keeps_what_the_bot_needs(name: str) -> None:
    unit = entries(name)
    assert unit["StateDirectory"] == ["bots"], "the bot's data (SQLite memory, the web chat's visitors) lives there"
    assert unit["WorkingDirectory"] == ["/var/lib/bots"]
    assert unit["UMask"] == ["0077"], "what the bot writes is its user's only"
    families = set(unit["RestrictAddressFamilies"][0].split())
    assert {"AF_INET", "AF_INET6", "AF_UNIX"} <= families, "the bot talks to the platforms, the model and Redis"
    for blocking in ("PrivateNetwork", "IPAddressDeny"):
        assert blocking not in unit, f"{blocking} would cut the bot off the network"
    assert unit["ProtectSystem"] == ["strict"] and unit["NoNewPrivileges"] == ["yes"]
    assert unit["CapabilityBoundingSet"] == [""], "the bot needs no capability (ports above 1024)"


@pytest.mark.parametrize("name", UNITS)
def test_systemd_analyze_rates_the_unit_under_3(name: str, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / UNITS[name]
    unit.write_text((DEPLOY / "systemd" / name).read_text(encoding="utf-8"), encoding="utf-8")
    done = subprocess.run(
        [analyze, "security", "--offline=yes", "--no-pager", str(unit)], capture_output=True, text=True, timeout=60
    )
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert found, done.stdout + done.stderr
    assert float(found[1]) < MAX_EXPOSURE, done.stdout
