"""The combination matrix (``tests.gate.matrix``): its cells cover every pair of values, the embedded model's
pairs in as few cells as can hold them, and each cell holds the gate's conversation through the ``bots`` program
(``python -m tests.gate.matrix`` runs the same cells and prints them as a table)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from .harness import Cell, run_cell
from .matrix import CELLS, COSTLY, DIMENSIONS, allowed, pairs_of, pairwise, table, values_of

EMBEDDED_BOUND = 900
"""Seconds a cell with the embedded model may take (tens of seconds an answer on two busy cores)."""


def test_every_pair_of_values_that_can_run_is_in_a_cell() -> None:
    covered = set().union(*(pairs_of(values) for values in pairwise(DIMENSIONS)))
    for first, second in itertools.combinations(DIMENSIONS, 2):
        for a, b in itertools.product(DIMENSIONS[first], DIMENSIONS[second]):
            if allowed({first: a, second: b}):
                assert pairs_of({first: a, second: b}) <= covered, (first, a, second, b)


def test_the_matrix_is_the_same_every_time_and_no_cell_is_impossible() -> None:
    assert pairwise(DIMENSIONS) == pairwise(DIMENSIONS)
    assert all(allowed(values) for values in pairwise(DIMENSIONS))
    assert len({cell.name for cell in CELLS}) == len(CELLS)


def test_the_embedded_model_is_in_as_few_cells_as_its_pairs_need() -> None:
    ((name, value),) = COSTLY.items()
    cells = pairwise(DIMENSIONS)
    costly = [values for values in cells if values[name] == value]
    fewest = max(len(values) for other, values in DIMENSIONS.items() if other != name)
    assert len(costly) == fewest
    assert cells[: len(costly)] == costly  # (made first, so a cheap cell never holds it)


def test_a_new_value_or_dimension_is_one_line() -> None:
    more = {**DIMENSIONS, "language": ("en", "fr", "de")}
    cells = pairwise(more)
    covered = set().union(*(pairs_of(values) for values in cells))
    assert pairs_of({"language": "de", "platform": "terminal"}) <= covered
    assert pairs_of({"language": "fr", "model": "embedded"}) <= covered


def _marks(cell: Cell) -> list[pytest.MarkDecorator]:
    return [pytest.mark.timeout(EMBEDDED_BOUND)] if cell.model == "embedded" else []


@pytest.mark.parametrize("cell", [pytest.param(c, id=c.name, marks=_marks(c)) for c in CELLS])
async def test_the_cell_holds_the_conversation(cell: Cell, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    database = request.getfixturevalue("database_url") if cell.store == "postgres" else None
    results = await run_cell(cell, tmp_path, database_url=database)
    assert set(results) == set(cell.platforms)


def test_the_docs_list_the_cells() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "explanation" / "release-gate.md"
    header = ["#", *DIMENSIONS]
    rows = [[str(i), *values_of(cell)] for i, cell in enumerate(CELLS, 1)]
    assert table(rows, header, markdown=True) in page.read_text(encoding="utf-8"), (
        "docs/explanation/release-gate.md lists other cells: paste `python -m tests.gate.matrix --list --markdown`"
    )
