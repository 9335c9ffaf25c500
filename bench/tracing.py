"""Tracing overhead: bench/core.py and bench/redis_queue.py's figures with tracing off and on, in alternating runs.

Prints figures; asserts nothing. Run: python bench/tracing.py [--rounds 3] [--base REV] [--no-queue]

Each round runs, in turn (the order rotating), every mode in a fresh process:
- ``base``: the code of git revision ``--base`` (say, the commit before tracing), unpacked with ``git archive``:
  "today", to tell whether tracing off is within noise of it;
- ``off``: this tree (or the revision ``--this``), ``TRACING_ENABLED`` unset;
- ``on``: the same, ``TRACING_ENABLED=true``, the SDK's batch processor and OTLP/HTTP exporter posting every
  span to a sink on loopback that answers 200 (what an operator runs, less the collector's own work).

Core: ``agent.send`` with the zero-delay scripted model (1 context sequential: messages/s and p50 per message;
1,000 contexts at once). Queue: two worker processes on a real redis-server, 200 contexts x 10 messages stored
while they run (messages/s), and ingest -> run start p50/p99 at 500 messages/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.server
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

# bench/ holds a file named like the package (core.py): keep it off the path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

ROOT = Path(__file__).resolve().parents[1]
_CORE = {
    "send/s": re.compile(r"sequential: ([\d,]+) messages/s"),
    "p50 ms": re.compile(r"overhead \(zero-delay model\): p50 ([\d.]+) ms"),
    "1000 ctx/s": re.compile(r"concurrently: ([\d,]+) messages/s"),
}


class _Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _env(mode: str, tree: Path, sink: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACING_", "OTEL_"))}
    if tree != ROOT:
        env["PYTHONPATH"] = str(tree)
    if mode == "on":
        env.update(TRACING_ENABLED="true", OTEL_EXPORTER_OTLP_ENDPOINT=sink)
    return env


def _core(mode: str, tree: Path, sink: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(tree / "bench" / "core.py")],
        capture_output=True,
        text=True,
        env=_env(mode, tree, sink),
        cwd=tree,
        check=True,
    ).stdout
    found = {}
    for name, pattern in _CORE.items():
        match = pattern.search(out)
        if match is None:
            raise RuntimeError(f"bench/core.py ({mode}) printed no {name!r}:\n{out}")
        found[name] = float(match.group(1).replace(",", ""))
    return found


def _queue(mode: str, tree: Path, sink: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "queue-one", "--tree", str(tree)],
        capture_output=True,
        text=True,
        env=_env(mode, tree, sink),
        cwd=tree,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


async def _queue_one(tree: Path) -> dict[str, float]:
    spec = importlib.util.spec_from_file_location("bench_queue", tree / "bench" / "redis_queue.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = module.Redis()
    bench = module.Bench(server.url)
    try:
        rate, _ = await bench.throughput(2, 200, 10, live=True)
        p50, p99 = await bench.latency(500, 4)
    finally:
        await bench.close()
        server.close()
    return {"queue msg/s": rate, "ingest->run p50 ms": p50 * 1e3, "ingest->run p99 ms": p99 * 1e3}


def _queue_main(tree: Path) -> None:
    traced: Any = contextlib.nullcontext()
    if os.environ.get("TRACING_ENABLED") == "true":
        from bots.tracing import TracingSettings, start_tracing

        traced = start_tracing(TracingSettings(enabled=True), role="bench")
    with traced:
        print(json.dumps(asyncio.run(_queue_one(tree))))


async def _cpu(rounds: int, sink: str) -> None:
    """CPU seconds per message (the whole process's, the exporter's thread included) of ``agent.send`` with the
    zero-delay scripted model, tracing off and on alternately in one process: less sensitive to a busy machine than
    wall-clock rates."""
    import time

    from bots.tracing import TracingSettings, start_tracing
    from core import InMemoryStore, ScriptedModel, context, create_agent, output

    reply = '<response><output type="m">Hello there!</output></response>'
    chat = context(type="chat", schema=str, key=lambda s: s)
    agent = create_agent(
        model=ScriptedModel(lambda request: reply, chunk_size=64),
        contexts=[chat],
        outputs=[output(type="m", handler=lambda data, ctx, agent: None)],
        memory=InMemoryStore(),
    )
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink
    n = 2000
    found: dict[str, list[float]] = {"off": [], "on": []}
    async with agent:
        for i in range(300):
            await agent.send(chat, f"w{i % 10}", {"type": "m", "data": "hi"})
        for _ in range(rounds):
            for mode in ("off", "on"):
                manager: Any = contextlib.nullcontext()
                if mode == "on":
                    manager = start_tracing(TracingSettings(enabled=True), role="bench")
                with manager:
                    start = time.process_time()
                    for i in range(n):
                        await agent.send(chat, f"c{i % 100}", {"type": "m", "data": "hi"})
                    if mode == "on":
                        manager.__exit__(None, None, None)  # the spans exported, counted
                        manager = contextlib.nullcontext()
                    found[mode].append((time.process_time() - start) / n)
    off, on = statistics.median(found["off"]), statistics.median(found["on"])
    print(
        f"agent.send CPU per message ({rounds} alternating rounds of {n}): off {off * 1e6:.0f} us, "
        f"on {on * 1e6:.0f} us (+{(on - off) * 1e6:.0f} us: about 5 spans a message, exported over OTLP/HTTP)"
    )


def _unpack(rev: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("queue-one")
    one.add_argument("--tree", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", help="git revision measured as 'today' (for example the commit before tracing)")
    parser.add_argument("--this", help="git revision measured off and on (default: this working tree)")
    parser.add_argument("--no-queue", action="store_true", help="bench/core.py only")
    parser.add_argument("--cpu-only", action="store_true", help="only the CPU per message, off and on, in one process")
    args = parser.parse_args()
    if args.command == "queue-one":
        _queue_main(Path(args.tree))
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sink = f"http://127.0.0.1:{server.server_address[1]}"
    asyncio.run(_cpu(max(3, args.rounds), sink))
    if args.cpu_only:
        server.shutdown()
        return
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as folder:
        this = _unpack(args.this, Path(folder) / "this") if args.this else ROOT
        trees = {"off": this, "on": this}
        if args.base:
            trees = {"base": _unpack(args.base, Path(folder) / "base"), **trees}
        modes = list(trees)
        results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        for n in range(args.rounds):
            order = modes[n % len(modes) :] + modes[: n % len(modes)]
            for mode in order:
                figures = _core(mode, trees[mode], sink)
                if not args.no_queue:
                    figures |= _queue(mode, trees[mode], sink)
                results[mode].append(figures)
                print(f"round {n + 1} {mode:>4}: " + ", ".join(f"{k} {v:,.2f}" for k, v in figures.items()), flush=True)
    server.shutdown()
    print("\nmedian of the rounds:")
    for mode in modes:
        keys = results[mode][0]
        shown = ", ".join(f"{k} {statistics.median(r[k] for r in results[mode]):,.2f}" for k in keys)
        print(f"  {mode:>4}: {shown}")


if __name__ == "__main__":
    main()
