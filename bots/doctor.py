"""``bots doctor``: the running fleet as Redis sees it, checked. Every gateway and worker announces itself (a
presence lease, ``bots.console.fleet.Presence``) with its version and the inbox entry format it writes and reads;
the doctor reads them with the backlog and the dead-letter list and says what is wrong:

- problems (exit 1): Redis cannot be read, no gateway or no worker alive, batches in the dead-letter list, writes
  waiting for a replica (``REDIS_MIN_REPLICAS`` above the replicas in sync with the primary: nothing is answered;
  ``core.fleet.replica_stall`` says what to do), Redis's data lost within a day (a process found the marker
  ``bots:fleet:data`` replaced: ``core.fleet.data_marker``);
- warnings: the processes run different versions (a rolling upgrade not finished), a worker reads an older entry
  format than a gateway writes (its batches wait for newer workers), messages waiting long for a worker.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from .settings import Settings

__all__ = ("WAIT_WARNING", "DoctorReport", "doctor_command", "doctor_report")

WAIT_WARNING = 60.0
"""Seconds the oldest waiting message may have waited before the doctor says to add workers."""


@dataclass(kw_only=True)
class DoctorReport:
    """What ``bots doctor`` found; ``--json`` prints it as it is."""

    processes: list[dict[str, Any]] = field(default_factory=list)
    """Each process alive: role, id, host, version, entry format, seconds since it started."""
    backlog: dict[str, Any] = field(default_factory=dict)
    """Messages waiting, conversations with work, drain jobs waiting for a worker, the oldest wait, dead batches."""
    lines: list[str] = field(default_factory=list)
    """What is fine, one line each."""
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


async def doctor_report(settings: Settings, *, timeout: float = 5.0) -> DoctorReport:
    """Read the fleet from Redis (``REDIS_URL`` or the sentinels) and judge it."""
    import time

    from core.fleet import RedisBackend
    from core.fleet.backend import replicas_in_step
    from core.fleet.data_marker import DataMarker
    from core.fleet.replica_stall import replica_stall

    from .console.fleet import FleetView
    from .worker import queue_config

    report = DoctorReport()
    config = queue_config(settings)
    backend = RedisBackend(config, client_name="bots-doctor")
    try:
        async with asyncio.timeout(timeout):
            await backend.run(backend.client.ping, what="connecting", retry_for=0)
            snap = await FleetView(backend.client, prefix=backend.keys.prefix).snapshot()
            lost = await DataMarker(prefix=backend.keys.prefix).report(backend.client)
            replication = await backend.client.info("replication") if backend.confirms else None
    except Exception as exc:
        report.problems.append(f"Redis at {config.shown_url} cannot be read ({exc}): check {config.settings_hint}")
        return report
    finally:
        await backend.close()
    if snap.error is not None:
        report.problems.append(f"Redis at {config.shown_url} cannot be read ({snap.error})")
        return report
    if lost is not None:
        report.problems.append(lost)
    if replication is not None:  # REDIS_MIN_REPLICAS > 0: acknowledgements wait for replicas in sync
        stall = replica_stall(replication, min_replicas=config.min_replicas, primary=backend.primary)
        if stall is not None:
            report.problems.append(stall)
        else:
            report.lines.append(
                f"{replicas_in_step(replication)} replicas in sync with the primary (REDIS_MIN_REPLICAS="
                f"{config.min_replicas}): writes are confirmed"
            )
    now = time.time()
    for m in snap.members:
        report.processes.append(
            {
                "role": m.role,
                "id": m.id,
                "host": m.host,
                "version": m.version or "unknown",
                "entry_format": m.entry_format or None,
                "up_seconds": round(max(0.0, now - m.started), 1),
            }
        )
    roles = Counter(m.role for m in snap.members)
    report.lines.append(f"{roles['gateway']} gateways and {roles['worker']} workers alive")
    for role in ("gateway", "worker"):
        if not roles[role]:
            report.problems.append(
                f"no {role} alive: start bots {role} (a process appears within a few seconds of starting)"
            )
    versions = Counter(m.version or "unknown" for m in snap.members)
    if len(versions) > 1:
        shown = ", ".join(f"{v} ({n})" for v, n in sorted(versions.items()))
        report.warnings.append(f"the processes run different versions: {shown}; finish the rolling upgrade")
    elif versions:
        report.lines.append(f"every process runs version {next(iter(versions))}")
    written = max((m.entry_format for m in snap.members if m.role == "gateway"), default=0)
    for m in snap.members:
        if m.role == "worker" and m.entry_format and m.entry_format < written:
            report.warnings.append(
                f"worker {m.id} reads inbox entries up to format {m.entry_format} and a gateway writes format "
                f"{written}: those batches wait for an upgraded worker; upgrade it"
            )
    report.backlog = {
        "waiting": snap.waiting,
        "conversations": snap.active,
        "jobs": snap.queue_depth,
        "oldest_wait_seconds": round(snap.oldest_wait, 1) if snap.oldest_wait is not None else None,
        "dead": len(snap.dead),
    }
    report.lines.append(
        f"backlog: {snap.waiting} messages waiting in {snap.active} conversations with work, "
        f"{snap.queue_depth} waiting for a free worker"
    )
    if snap.oldest_wait is not None and snap.oldest_wait > WAIT_WARNING:
        report.warnings.append(
            f"the oldest waiting message has waited {snap.oldest_wait:.0f}s: add workers (bots worker) or raise "
            "REDIS_WORKER_CONCURRENCY"
        )
    if snap.dead:
        report.problems.append(
            f"{len(snap.dead)} batches in the dead-letter list ({backend.keys.dead}): they failed REDIS_MAX_ATTEMPTS "
            "times; see the worker logs, then run them again or drop them on the console's fleet page"
        )
    for name, alive, leases in snap.shards:
        report.lines.append(f"Discord {name}: {leases} shard leases held by {alive} gateways")
    return report


def doctor_command(settings: Settings, *, as_json: bool = False) -> int:
    """Print the report; 1 when something is wrong."""
    import sys

    report = asyncio.run(doctor_report(settings))
    if as_json:
        print(json.dumps({"ok": report.ok, **asdict(report)}, indent=2, ensure_ascii=False))
        return 0 if report.ok else 1
    for p in report.processes:
        print(f"{p['role']:8} {p['id']}  version {p['version']}  up {p['up_seconds']:.0f}s")
    for line in report.lines:
        print(line)
    for title, lines, out in (("warnings", report.warnings, sys.stdout), ("problems", report.problems, sys.stderr)):
        if lines:
            print(f"\n{title}:", file=out)
            for line in lines:
                print(f"  {line}", file=out)
    if report.ok:
        print("\nfleet OK")
    return 0 if report.ok else 1
