"""The fleet through network faults, on hosts of its own (issue 40): each scenario of ``tests.fleet.netfaults``
once, with the usual judgement: 0 lost, 0 out of order, answered twice only where the faulty worker's post was made
and its record lost (the post answered again is its own or one of its) or a lease was given up, except where
docs/explanation/guarantees.md states a measured bound. (Counted before as no more than its posts from 2 s before the
fault on: on a crowded machine a post from further back had not been recorded yet, and 12 came out against 10.) Where a
scenario fires schedules, each occurrence counts as a message, and none may be posted before its time nor more than
``SCHEDULES_LATE`` seconds after it.
``pytest -m netfaults`` selects them; ``bench/network_faults.py`` runs them more often."""

from __future__ import annotations

from pathlib import Path

import pytest

from .netfaults import SCENARIOS
from .netns import sweep, unavailable

pytestmark = pytest.mark.netfaults

_WHY = unavailable()
SCHEDULES_LATE = 15.0
"""Seconds after its time a schedule's answer may be posted at most, in a scenario that fires them: a claim lease
(5 s) and a poll (1 s) when the worker that claimed it was cut off, and the run of its conversation, under the load
on a shared machine (a worker by its own clock a minute behind would post a minute late)."""


@pytest.fixture(autouse=True)
def hosts_allowed() -> None:
    if _WHY is not None:
        pytest.skip(_WHY)
    sweep()  # what a killed run left behind


@pytest.mark.timeout(240)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_the_fleet_through_a_network_fault(scenario: str, tmp_path: Path) -> None:
    result = await SCENARIOS[scenario](tmp_path)
    print(f"\n{result.row()}")
    assert result.out_of_order == 0, result
    if scenario == "split-brain-0":
        return  # the documented loss; the bench measures it
    assert result.lost == 0, result
    assert result.twice <= result.victims + result.given_up, result
    assert result.notes.get("victim posts after its lease", 0) == 0, result
    assert result.notes.get("schedules early", 0) == 0, result
    assert float(str(result.notes.get("schedules late at most", 0))) <= SCHEDULES_LATE, result
