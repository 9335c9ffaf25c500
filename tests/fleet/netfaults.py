"""The network-fault scenarios of the fleet (issue 40), each one run of the usual chat load on ``NetFleet`` with
one fault in the middle, returning its ``Result``; ``tests/fleet/test_netfaults.py`` runs each once and judges it,
``bench/network_faults.py`` runs them more often and prints the table."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from .netfleet import NetFleet, Result
from .netns import FAKETIME

__all__ = ("MORE_SCENARIOS", "SCENARIOS")

LEASE = 3.0
"""REDIS_LEASE_SECONDS of these fleets."""


async def _run(
    scenario: str,
    folder: Path,
    fault: Callable[[NetFleet], Awaitable[float]],
    *,
    victim: str = "",
    setup: Callable[[NetFleet], Awaitable[None]] | None = None,
    judge: Callable[[NetFleet, Result], Awaitable[None]] | None = None,
    **fleet_args: object,
) -> Result:
    """Start a fleet in ``folder``, ``setup`` it (else start its gateway and two workers), run the load with
    ``fault`` (which returns when it healed), judge what the users saw (and, with ``judge``, what else the
    scenario looks at)."""
    fleet = NetFleet(folder, **fleet_args)  # type: ignore[arg-type]
    try:
        await fleet.start()
        if setup is not None:
            await setup(fleet)
        else:
            await fleet.start_processes()
        healed = 0.0

        async def faulty() -> None:
            nonlocal healed
            healed = await fault(fleet)

        fault_at = await fleet.chat_load(faulty)
        result = await fleet.settle(scenario, fault_at=fault_at, healed_at=healed, victim=victim)
        result.notes.update(fleet.notes)
        result.notes.update(fleet_notes(fleet, fault_at, healed, victim))
        if judge is not None:
            await judge(fleet, result)
        return result
    finally:
        await fleet.close()


def fleet_notes(fleet: NetFleet, fault_at: float, healed: float, victim: str) -> dict[str, object]:
    """What the fake Bot API saw of ``victim``'s posts: how many it made after its lease would have run out and
    before the link healed (after, it may hold conversations again)."""
    if not victim:
        return {}
    token = fleet.workers[victim][1]
    posts = ("sendMessage", "editMessageText", "deleteMessage")
    cut_at = fleet.cut_at or fault_at
    late = [
        c for c in fleet.telegram.calls if c.token == token and c.method in posts and cut_at + LEASE < c.at < healed
    ]
    shown = ", ".join(f"{c.method} +{c.at - cut_at:.2f}s" for c in late[:6])
    return {"victim posts after its lease": len(late), **({"late": shown} if late else {})}


# -- the scenarios -------------------------------------------------------------------------------------------


async def worker_cut_from_redis(folder: Path) -> Result:
    """Worker A cut off Redis (both ways, packets dropped) for two leases while it keeps running."""

    async def fault(fleet: NetFleet) -> float:
        fleet.net.cut(fleet.hosts["worker-a"], fleet.redis[0])
        fleet.cut_at = time.monotonic()
        await asyncio.sleep(2 * LEASE)
        healed = time.monotonic()  # (before the heal: a post after it may be a new claim's)
        fleet.net.heal()
        return healed

    result = await _run("worker cut from Redis (2 leases)", folder, fault, victim="worker-a", lease=LEASE)
    return result


async def worker_cut_from_platform(folder: Path) -> Result:
    """Worker A cut off the Bot API (both ways) for 5 s, still reaching Redis."""

    async def fault(fleet: NetFleet) -> float:
        fleet.net.cut(fleet.hosts["worker-a"], fleet.hosts["telegram"])
        await asyncio.sleep(5)
        fleet.net.heal()
        return time.monotonic()

    return await _run("worker cut from the Bot API", folder, fault, lease=LEASE)


async def worker_deaf_to_platform(folder: Path) -> Result:
    """Worker A hears nothing back from the Bot API for 5 s (a one-way cut: its requests arrive, the answers are
    dropped), still reaching Redis: its posts are made but it never learns so."""

    async def fault(fleet: NetFleet) -> float:
        fleet.net.cut(fleet.hosts["telegram"], fleet.hosts["worker-a"], one_way=True)
        await asyncio.sleep(5)
        fleet.net.heal()
        return time.monotonic()

    return await _run("worker deaf to the Bot API (one way)", folder, fault, victim="worker-a", lease=LEASE)


async def gateway_cut_from_redis(folder: Path) -> Result:
    """The gateway cut off Redis for 5 s while the Bot API keeps handing it updates."""

    async def fault(fleet: NetFleet) -> float:
        fleet.net.cut(fleet.hosts["gateway"], fleet.redis[0])
        await asyncio.sleep(5)
        fleet.net.heal()
        return time.monotonic()

    return await _run("gateway cut from Redis (5 s)", folder, fault, lease=LEASE)


def split_brain(min_replicas: int) -> Callable[[Path], Awaitable[Result]]:
    """The primary and the gateway on one side of a partition, the sentinels, the replica and the workers on the
    other, for 8 s: the sentinels promote the replica while the gateway goes on writing to the old primary, which
    becomes a replica (its writes dropped) once the partition heals."""

    async def scenario(folder: Path) -> Result:
        async def fault(fleet: NetFleet) -> float:
            old, gateway = fleet.redis[0], fleet.hosts["gateway"]
            other_side = [*fleet.redis[1:], *fleet.sentinels, fleet.hosts["worker-a"], fleet.hosts["worker-b"]]
            for host in other_side:
                fleet.net.cut(old, host)
                fleet.net.cut(gateway, host)
            await asyncio.sleep(5)
            promoted = await asyncio.to_thread(fleet.primary)
            fleet.net.heal()
            fleet.notes["promoted during the partition"] = promoted is not old
            return time.monotonic()

        result = await _run(
            f"split brain, REDIS_MIN_REPLICAS={min_replicas}",
            folder,
            fault,
            replicas=1,
            lease=5.0,
            min_replicas=min_replicas,
        )
        return result

    return scenario


async def primary_lost_two_replicas(folder: Path) -> Result:
    """Two replicas, ``REDIS_MIN_REPLICAS=1``: the primary cut off everything for good; the sentinels promote one
    of the replicas (which one is noted)."""

    async def fault(fleet: NetFleet) -> float:
        old = fleet.redis[0]
        for host in fleet.net.hosts.values():
            if host is not old:
                fleet.net.cut(old, host)
        deadline = time.monotonic() + 30
        while (promoted := await asyncio.to_thread(fleet.primary)) is old and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        fleet.notes["promoted"] = promoted.name
        return time.monotonic()

    return await _run("primary lost, two replicas", folder, fault, replicas=2, lease=5.0, min_replicas=1)


def _proxied(delay: float, reset_every: float | None, name: str) -> Callable[[Path], Awaitable[Result]]:
    """The workers reach Redis through a ``FaultProxy``: for 6 s it delays each way by ``delay`` and resets
    connections at random (``reset_every``)."""

    async def scenario(folder: Path) -> Result:
        proxy_of: dict[str, object] = {}

        async def setup(fleet: NetFleet) -> None:
            proxy = await fleet.proxy(fleet.redis[0]).start()
            proxy_of["proxy"] = proxy
            fleet.redis_url_override = f"redis://{proxy.address}:{proxy.port}/0"
            await fleet.start_processes()

        async def fault(fleet: NetFleet) -> float:
            proxy = fleet.net.proxies[0]
            proxy.delay, proxy.reset_every = delay, reset_every
            await asyncio.sleep(6)
            proxy.delay, proxy.reset_every = 0.0, None
            fleet.notes["connections reset"] = proxy.resets
            return time.monotonic()

        return await _run(name, folder, fault, setup=setup, lease=LEASE)

    return scenario


async def clock_off(folder: Path) -> Result:
    """Worker A's clock a minute ahead, worker B's a minute behind (libfaketime), a link cut in the middle (worker
    A from Redis for two leases) so that leases are taken over between the two clocks."""

    async def setup(fleet: NetFleet) -> None:
        fleet.gateway()
        for name, offset in (("worker-a", "+60s"), ("worker-b", "-60s")):
            fleet.worker(name, env={"LD_PRELOAD": FAKETIME, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
        await fleet.telegram.wait_for(lambda: len(fleet.telegram.calls_of("getUpdates")) > 0, timeout=60)

    async def fault(fleet: NetFleet) -> float:
        fleet.net.cut(fleet.hosts["worker-a"], fleet.redis[0])
        fleet.cut_at = time.monotonic()
        await asyncio.sleep(2 * LEASE)
        healed = time.monotonic()
        fleet.net.heal()
        return healed

    return await _run("clocks a minute off (+-60 s)", folder, fault, setup=setup, victim="worker-a", lease=LEASE)


REMINDERS = 20
"""One-off reminders of ``clocks_off_schedules``, each in a chat of its own (9000...), due one a second."""
RECURRING_EVERY = 8.0
"""Seconds between two occurrences of its two recurring schedules (chats 9100, 9101): more than a claim lease
(5 s) and a poll, so that an occurrence handed over is not so late that the next one is skipped."""
EARLY_SLACK = 0.25
"""Seconds before its time a post may come and not count as early: the workers read the primary's clock through an
offset measured over a round trip (half of which is the error at most)."""


def _inputs(text: str) -> int:
    """Schedule inputs a post of the model fake answers (``echo: <input> | <input>...``), 1 at least."""
    return max(1, text.count("It is time for"))


async def clocks_off_schedules(folder: Path) -> Result:
    """Worker A's clock a minute ahead, worker B's a minute behind (libfaketime), both firing the fleet's schedules
    as ``bots worker`` does (by the Redis primary's clock): 20 reminders, each in a chat of its own, due one a
    second from 8 s after they are set, and two recurring ones every 8 s, set just before the usual load; the
    fault: worker A cut off Redis from the seventh reminder's time until 2 s after the last one's, so B, the one
    behind, fires the rest alone and takes A's claims and conversations over. A worker by its own clock would post
    every reminder a minute early (A) or a minute late (B, alone)."""
    due: dict[int, list[float]] = {}
    """Chat -> the times (``time.monotonic()``) its schedule is due (those up to the last reminder's)."""

    async def setup(fleet: NetFleet) -> None:
        fleet.gateway()
        for name, offset in (("worker-a", "+60s"), ("worker-b", "-60s")):
            env = {"LD_PRELOAD": FAKETIME, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
            fleet.worker(name, env=env, schedules=True)
        tokens = {token for _, token in fleet.workers.values()}
        await fleet.telegram.wait_for(
            lambda: (
                tokens <= {c.token for c in fleet.telegram.calls_of("getMe")}
                and len(fleet.telegram.calls_of("getUpdates")) > 0
            ),
            timeout=60,
        )
        now = time.time()
        shift = now - time.monotonic()
        listed: list[dict[str, object]] = []
        for n in range(REMINDERS):
            at = now + 8 + n
            listed.append({"chat": 9000 + n, "at": at, "text": f"reminder {n}"})
            due[9000 + n] = [at - shift]
        last = now + 8 + REMINDERS - 1
        for n in range(2):
            start = now + 8.5 + 2 * n
            listed.append({"chat": 9100 + n, "at": start, "every": RECURRING_EVERY, "text": f"recurring {n}"})
            count = int((last - start) // RECURRING_EVERY) + 1
            due[9100 + n] = [start - shift + k * RECURRING_EVERY for k in range(count)]
        await fleet.set_schedules(listed)

    async def fault(fleet: NetFleet) -> float:
        await asyncio.sleep(max(0.0, due[9006][0] - time.monotonic()))
        fleet.net.cut(fleet.hosts["worker-a"], fleet.redis[0])
        fleet.cut_at = time.monotonic()
        await asyncio.sleep(max(2 * LEASE, due[9000 + REMINDERS - 1][0] + 2 - time.monotonic()))
        healed = time.monotonic()
        fleet.net.heal()
        return healed

    async def judge(fleet: NetFleet, result: Result) -> None:
        last = max(times[-1] for times in due.values())
        deadline = last + 30

        def posts(chat: int) -> list[tuple[float, int]]:
            found = [m for m in fleet.telegram.sent if m.chat_id == chat and not m.deleted]
            return [(m.posted_at, _inputs(m.text)) for m in found]

        while time.monotonic() < deadline:
            if all(sum(n for _, n in posts(c)) >= len(times) for c, times in due.items()):
                break
            await asyncio.sleep(0.5)
        lost = twice = early = 0
        late = 0.0
        missing: list[str] = []
        for chat, times in due.items():
            fired = [0] * len(times)
            for at, n in sorted(posts(chat)):
                if chat >= 9100 and at - times[-1] > RECURRING_EVERY:
                    # the post's latest inputs are occurrences after the last one judged
                    n -= min(n, int((at - times[-1]) // RECURRING_EVERY))
                for _ in range(n):
                    # an input answers the earliest occurrence due by then and not yet answered: a run that took
                    # two occurrences in one batch (the first handed over from a worker cut off) posts them as one
                    which = [k for k, when in enumerate(times) if when <= at + EARLY_SLACK]
                    if not which:
                        early += 1  # before its first occurrence
                        continue
                    k = next((k for k in which if fired[k] == 0), which[-1])
                    fired[k] += 1
                    late = max(late, at - times[k])
            lost += sum(1 for n in fired if n == 0)
            missing += [f"{chat}#{k} +{times[k] - fleet.cut_at:.1f}s" for k, n in enumerate(fired) if n == 0]
            twice += sum(n - 1 for n in fired if n > 1)
        result.lost += lost
        result.twice += twice
        result.notes.update(
            {
                "schedules": sum(len(t) for t in due.values()),
                "schedules lost": lost,
                "schedules twice": twice,
                "schedules early": early,
                "schedules late at most": round(late, 2),
                **({"schedules missing (due, from the cut)": ", ".join(missing)} if missing else {}),
            }
        )

    return await _run(
        "clocks a minute off, schedules",
        folder,
        fault,
        setup=setup,
        judge=judge,
        victim="worker-a",
        lease=LEASE,
    )


SCENARIOS: dict[str, Callable[[Path], Awaitable[Result]]] = {
    "worker-cut-from-redis": worker_cut_from_redis,
    "worker-cut-from-platform": worker_cut_from_platform,
    "gateway-cut-from-redis": gateway_cut_from_redis,
    "split-brain-0": split_brain(0),
    "split-brain-1": split_brain(1),
    "primary-lost-two-replicas": primary_lost_two_replicas,
    "slow-link": _proxied(0.2, None, "workers<->Redis 200 ms each way"),
    "random-resets": _proxied(0.0, 1.0, "workers<->Redis reset at random"),
    "clock-off": clock_off,
    "clock-off-schedules": clocks_off_schedules,
}
"""Every scenario by its id (each a test of ``tests/fleet/test_netfaults.py``)."""

MORE_SCENARIOS: dict[str, Callable[[Path], Awaitable[Result]]] = {
    "worker-deaf-to-platform": worker_deaf_to_platform,
}
"""Scenarios only the benchmark runs (the tests' time is bounded)."""
