"""The combination matrix of the release gate: the settings that change a message's path, covered pairwise (every
pair of values of two settings appears in at least one cell), each cell running the gate's conversation through
the ``bots`` program (``tests.gate.harness``).

``python -m tests.gate.matrix`` runs every cell and prints the cells and their results as a table (``--list``:
the cells only, ``--markdown``: as the docs show them); ``make test`` runs the same cells through
``tests/gate/test_matrix.py``. To add a value or a dimension, add one line to ``DIMENSIONS`` (a setting that is only
environment variables: ``SETTINGS`` maps each value to them) or ``SETTINGS``.

The embedded model is slow on two cores, so it is a costly value: the cells holding it are made first and only
until every pair with it is covered (as many cells as the largest other dimension has values), and the cells after
them use the hosted fake.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from core.busy import BusyPolicy

from .harness import QUIET_MS, Cell
from .platforms import PLATFORMS

__all__ = (
    "CELLS",
    "COSTLY",
    "DIMENSIONS",
    "SETTINGS",
    "allowed",
    "cell_of",
    "pairs_of",
    "pairwise",
    "table",
    "values_of",
)

SETTINGS: dict[str, dict[str, dict[str, str]]] = {
    "busy": {policy.value: {"BOT_BUSY": policy.value} for policy in BusyPolicy},
    "quiet": {"off": {"BOT_QUIET_MS": "0"}, "on": {"BOT_QUIET_MS": QUIET_MS}},
}
"""Dimensions that are only settings: each value's environment variables."""

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "platform": PLATFORMS,
    "model": ("embedded", "hosted"),
    "deployment": ("process", "fleet"),
    "plugins": ("none", "new", "assistant"),
    "store": ("sqlite", "postgres"),
    **{name: tuple(values) for name, values in SETTINGS.items()},
}
"""Each setting that changes a message's path and its values (the first five are what ``Cell`` starts)."""

COSTLY = {"model": "embedded"}
"""Values whose cells are slow: kept to as few cells as covering their pairs needs."""


def allowed(values: Mapping[str, str]) -> bool:
    """Whether a (partial) cell can run: the terminal chat is one process on one terminal, never a fleet."""
    return not (values.get("platform") == "terminal" and values.get("deployment") == "fleet")


Pair = tuple[tuple[str, str], tuple[str, str]]


def pairs_of(values: Mapping[str, str]) -> set[Pair]:
    """The pairs of (dimension, value) a cell covers."""
    items = sorted(values.items())
    return {(a, b) for a, b in itertools.combinations(items, 2)}


def pairwise(
    dimensions: Mapping[str, Sequence[str]],
    *,
    costly: Mapping[str, str] = COSTLY,
    can_run: Callable[[Mapping[str, str]], bool] = allowed,
) -> list[dict[str, str]]:
    """Cells (a value for each dimension) in which every pair of values that ``can_run`` appears at least once;
    deterministic (greedy: each new cell starts from the first pair still uncovered and takes, dimension by
    dimension, the value covering most uncovered pairs, the first on a tie). The pairs of each ``costly`` value
    are covered first by cells holding it; the cells after those never hold it."""
    names = list(dimensions)
    wanted: set[Pair] = set()
    for first, second in itertools.combinations(names, 2):
        for a in dimensions[first]:
            for b in dimensions[second]:
                if can_run({first: a, second: b}):
                    wanted |= pairs_of({first: a, second: b})
    cells: list[dict[str, str]] = []
    phases: list[tuple[dict[str, tuple[str, ...]], Callable[[Pair], bool]]] = [
        ({name: (value,)}, lambda pair, name=name, value=value: (name, value) in pair)  # type: ignore[misc]
        for name, value in costly.items()
    ]
    cheap = {name: tuple(v for v in dimensions[name] if v != value) for name, value in costly.items()}
    phases.append((cheap, lambda pair: True))
    for phase, aimed in phases:
        choices = {name: tuple(phase.get(name, dimensions[name])) for name in names}
        while True:
            open_pairs = sorted(p for p in wanted if aimed(p) and all(v in choices[d] for d, v in p))
            if not open_pairs:
                break
            (d1, v1), (d2, v2) = open_pairs[0]
            cell = {d1: v1, d2: v2}
            for name in names:
                if name in cell:
                    continue
                best = max(
                    (v for v in choices[name] if can_run({**cell, name: v})),
                    key=lambda v: len(pairs_of({**cell, name: v}) & wanted),
                )
                cell[name] = best
            wanted -= pairs_of(cell)
            cells.append({name: cell[name] for name in names})
    return cells


def cell_of(values: Mapping[str, str]) -> Cell:
    """The ``Cell`` that runs ``values``."""
    env: dict[str, str] = {}
    for name, settings in SETTINGS.items():
        env.update(settings[values[name]])
    return Cell(
        platforms=(values["platform"],),
        model=values["model"],
        deployment=values["deployment"],
        plugins=values["plugins"],
        store=values["store"],
        env=tuple(sorted(env.items())),
        labels=tuple((name, values[name]) for name in SETTINGS),
    )


CELLS: list[Cell] = [cell_of(values) for values in pairwise(DIMENSIONS)]
"""The matrix's cells, in order."""


def table(rows: Sequence[Sequence[str]], header: Sequence[str], *, markdown: bool = False) -> str:
    """``rows`` under ``header``: aligned text, or a Markdown table."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=False)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in [header, *rows])


def values_of(cell: Cell) -> list[str]:
    labels = dict(cell.labels)
    known = {
        "platform": "+".join(cell.platforms),
        "model": cell.model,
        "deployment": cell.deployment,
        "plugins": cell.plugins,
        "store": cell.store,
    }
    return [known.get(name) or labels.get(name, "") for name in DIMENSIONS]


async def _run_all(cells: Sequence[Cell]) -> list[tuple[str, str]]:
    from tests.postgres_server import PostgresServer

    from .harness import cell_folder, run_cell

    postgres = PostgresServer() if any(c.store == "postgres" for c in cells) else None
    if postgres is not None:
        postgres.start()
    results: list[tuple[str, str]] = []
    try:
        for cell in cells:
            started = time.monotonic()
            database = postgres.create_database() if postgres is not None and cell.store == "postgres" else None
            try:
                await run_cell(cell, cell_folder(), database_url=database)
                outcome = "passed"
            except Exception as exc:  # a failing cell is a row of the table, not the end of the run
                outcome = f"FAILED: {type(exc).__name__}: {str(exc)[:120]}"
            results.append((outcome, f"{time.monotonic() - started:.0f}"))
            print(f"cell {len(results)}/{len(cells)} {cell.name}: {outcome}", file=sys.stderr, flush=True)
    finally:
        if postgres is not None:
            postgres.stop()
            postgres.cleanup()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.gate.matrix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the cells without running them")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    header = ["#", *DIMENSIONS]
    rows = [[str(i), *values_of(cell)] for i, cell in enumerate(CELLS, 1)]
    if args.list:
        print(table(rows, header, markdown=args.markdown))
        return 0
    results = asyncio.run(_run_all(CELLS))
    rows = [[*row, outcome, seconds] for row, (outcome, seconds) in zip(rows, results, strict=True)]
    print(table(rows, [*header, "result", "seconds"], markdown=args.markdown))
    return 0 if all(outcome == "passed" for outcome, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
