"""The fleet through network faults, on hosts of its own (issue 40): every scenario of ``tests/fleet/netfaults.py`` (those the tests run and ``MORE_SCENARIOS``)
``--runs`` times (the primary lost with two replicas ``--promotions`` times, to see either replica promoted), each
run a fresh fleet in network namespaces (``bots gateway``, two queue workers, Redis with its replicas and three
sentinels, the fake Bot API and the model fake each on a host of its own) under the usual load: 50 chats x 10
messages, interleaved, the fault made once replies are being posted.

Prints one row per run, then a table: scenario, lost, answered twice, out of order (their sums over the runs),
and the time to recover (the worst run's seconds from the start of the fault to the last message answered); for
the scenario that fires schedules (``clock-off-schedules``), its occurrences lost and fired twice count in lost and
twice, and a line under its row says how many there were, how many came early, and the latest after its time.
Needs root, ``ip`` and ``nft`` (Debian: iproute2, nftables) and, for the clock scenario, ``faketime``.
Run: .venv/bin/python bench/network_faults.py [--runs 3] [--promotions 8] [--only split-brain-0,...]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fleet.netfaults import MORE_SCENARIOS, SCENARIOS  # noqa: E402
from tests.fleet.netfleet import Result  # noqa: E402
from tests.fleet.netns import sweep, unavailable  # noqa: E402


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs of each scenario")
    p.add_argument("--promotions", type=int, default=8, help="runs of the primary lost with two replicas")
    p.add_argument("--only", default="", help="scenario ids, comma-separated (default: all)")
    args = p.parse_args()
    why = unavailable()
    if why is not None:
        raise SystemExit(f"bench/network_faults.py: {why}")
    sweep()
    every = {**SCENARIOS, **MORE_SCENARIOS}
    chosen = [s for s in args.only.split(",") if s] or list(every)
    table: dict[str, list[Result]] = {}
    for scenario in chosen:
        runs = args.promotions if scenario == "primary-lost-two-replicas" else args.runs
        for n in range(runs):
            with tempfile.TemporaryDirectory(prefix="netfaults-") as folder:
                result = await every[scenario](Path(folder))
            print(f"{n + 1:>2}/{runs} {result.row()}", flush=True)
            table.setdefault(result.scenario, []).append(result)
    print()
    print(f"{'scenario':<34} {'runs':>4} {'lost':>5} {'twice':>6} {'order':>6} {'recover':>9}")
    for name, results in table.items():
        lost = sum(r.lost for r in results)
        twice = sum(r.twice for r in results)
        order = sum(r.out_of_order for r in results)
        recover = max(r.recover for r in results)
        print(f"{name:<34} {len(results):>4} {lost:>5} {twice:>6} {order:>6} {recover:>8.1f}s")
        promoted = [str(r.notes["promoted"]) for r in results if "promoted" in r.notes]
        if promoted:
            print(f"{'':<34} promoted: {', '.join(promoted)}")
        fired = [r for r in results if "schedules" in r.notes]
        if fired:  # lost and twice above count them too
            schedules = sum(int(str(r.notes["schedules"])) for r in fired)
            early = sum(int(str(r.notes["schedules early"])) for r in fired)
            late = max(float(str(r.notes["schedules late at most"])) for r in fired)
            print(f"{'':<34} schedules: {schedules} occurrences, {early} early, the latest {late:.1f}s after its time")


if __name__ == "__main__":
    asyncio.run(main())
