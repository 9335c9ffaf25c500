"""The privacy matrix (``tests.gate.privacy``, issue 49): every pair of (deployment, busy policy, quiet window)
values in one run, each run holding the two people's scenario on Telegram, Discord and the web chat at once through
the ``bots`` program; no fact, passage or usage crosses from Ann to Bob. ``python -m tests.gate.privacy --full``
runs every combination."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from .matrix import pairs_of, table
from .privacy import DIMENSIONS, FULL, HEADER, PLATFORMS, RUNS, rows_of, run_of, run_privacy


def test_every_pair_of_values_is_in_a_run_and_every_run_holds_every_platform() -> None:
    covered = set().union(*(pairs_of(run) for run in RUNS))
    for first, second in itertools.combinations(DIMENSIONS, 2):
        for a, b in itertools.product(DIMENSIONS[first], DIMENSIONS[second]):
            assert pairs_of({first: a, second: b}) <= covered, (first, a, second, b)
    assert all(run_of(run).platforms == PLATFORMS for run in RUNS)
    assert len(RUNS) < len(FULL) == 16
    assert len({run_of(run).name for run in RUNS}) == len(RUNS)


@pytest.mark.parametrize("run", [pytest.param(run, id=run_of(run).name) for run in RUNS])
async def test_two_people_keep_their_facts_passages_and_usage_apart(
    run: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    database = request.getfixturevalue("database_url") if run["deployment"] == "fleet" else None
    held = await run_privacy(run, tmp_path, database_url=database)
    assert [line.partition(":")[0] for line in held] == list(PLATFORMS)


def test_the_docs_list_the_runs() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "explanation" / "release-gate.md"
    assert table(rows_of(RUNS), HEADER, markdown=True) in page.read_text(encoding="utf-8"), (
        "docs/explanation/release-gate.md lists other runs: paste `python -m tests.gate.privacy --list --markdown`"
    )
