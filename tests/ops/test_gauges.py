"""Every metric the README and the observing guide name exists on ``/metrics``, and the gauges among them move as
they say: the gateway's shards, a worker's leases, the queue depth (the fleet tests read them from real processes:
tests/fleet/test_e2e_backlog_metrics.py)."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import REGISTRY

from bots import metrics

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", ROOT / "docs" / "how-to" / "observe.md")


def sample_names() -> set[str]:
    return {sample.name for family in REGISTRY.collect() for sample in family.samples} | {
        family.name for family in REGISTRY.collect()
    }


def test_every_metric_the_docs_name_exists() -> None:
    named = {name for page in PAGES for name in re.findall(r"\bbots_[a-z_]*[a-z]", page.read_text())}
    assert "bots_queue_depth" in named and "bots_worker_leases_held" in named
    exported = sample_names()
    missing = sorted(
        name
        for name in named
        if name not in exported
        and name.removesuffix("_total") not in exported  # a counter with labels and no sample yet
        and not any(e.startswith(name + "_") for e in exported)  # bots_schedules_* ...
    )
    assert missing == [], f"named in the docs but never exported: {missing}"


def value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_the_gauges_move_as_documented() -> None:
    held = value("bots_worker_leases_held") or 0.0
    for event in ("claimed", "claimed", "renewed", "released"):
        metrics.observe(f"lease_{event}", "telegram:chat:1")
    assert value("bots_worker_leases_held") == held + 1
    metrics.observe("lease_lost", "telegram:chat:2")
    assert value("bots_worker_leases_held") == held

    metrics.observe("queue_depth", "inbox", 7)
    metrics.observe("queue_depth", "jobs", 2)
    assert value("bots_queue_depth", queue="inbox") == 7.0 and value("bots_queue_depth", queue="jobs") == 2.0
    for queue in ("inbox", "jobs"):
        metrics.observe("queue_depth", queue, 0)

    metrics.set_shards("discord", count=8, held=[0, 3])
    assert value("bots_gateway_shards", platform="discord") == 8.0
    assert [s for s in range(8) if value("bots_gateway_shard_held", platform="discord", shard=str(s))] == [0, 3]
    metrics.set_shards("discord", count=8, held=[3])  # shard 0 given back: its series goes
    assert value("bots_gateway_shard_held", platform="discord", shard="0") is None
    metrics.set_shards("discord", count=8, held=[])
    assert value("bots_gateway_shard_held", platform="discord", shard="3") is None
