"""The fleet's fault matrix (issue 50), one test per scenario of ``tests.fleet.faultmatrix``: a primary killed and
started again after 0, 2, 5 and 15 s; the primary gone for good with one replica (then a replica added, as the doctor
says) and with two; a sentinel frozen through a failover; a worker killed; the gateway killed; Redis restarted alone.
Every busy policy and both sides of the quiet window run in each (chats pinned to each pair). Each must lose
nothing, answer nothing out of order, and answer twice no more than its stated bound. ``python -m
tests.fleet.faultmatrix`` prints the whole table."""

from __future__ import annotations

from pathlib import Path

import pytest

from .faultmatrix import HEADER, SCENARIOS, run_scenario


@pytest.mark.timeout(300)  # 10 to 40 s each alone; a 2-core machine shared with other test runs takes longer
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_the_fleet_through_a_fault(scenario: str, tmp_path: Path) -> None:
    row = await run_scenario(scenario, tmp_path)
    print(f"\n{HEADER}\n{row.line()}")
    if "evidence" in row.notes:
        print(row.notes["evidence"])
    assert row.lost == [], row
    assert row.out_of_order == [], row
    assert row.twice <= row.bound, row
