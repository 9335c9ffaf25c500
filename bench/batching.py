"""What llama.cpp gains on this machine by writing several answers side by side: the ceiling of ``local_speed``'s ratio.

The embedded model serves conversations at once in one batch (``LocalModel``'s slots): each step of the batch
reads the weights once for every sequence in it. Where reading the weights is what a step costs (a machine with
many cores, or whose matrix kernels are fast), a batch of four costs little more than one; where the arithmetic on
the weights is what it costs (two cores doing dot products), a batch of four costs nearly four. This measures which,
with llama.cpp alone (no bot, no prompt of the bot's): the weights ``make run`` loads (or ``--model FILE.gguf``), as
many slots as ``--parallel``, and for each run:

- **writing**: ``--tokens`` tokens written greedily in one slot, then in ``--parallel`` slots at once (their short
  prompts evaluated before the clock starts); the time of the batch against the time of one;
- **evaluating**: a prompt of some ``--prompt-tokens`` tokens evaluated in one slot, then ``--parallel`` different
  ones at once (nothing of them in the cache).

The runs alternate (one, then all at once) and the medians are printed with the ratio: at 1.0 the batch is free, at
``--parallel`` it buys nothing. ``bench/local_speed.py``'s four at once cannot end much below this ratio times the
single line's time, since each of their lines is written and evaluated this way. ``--profile`` runs the batch
under ``perf record`` (when the machine has ``perf``) and prints the functions it spent its time in.

Run: ``python bench/batching.py`` (``--runs 3``, ``--parallel 4``, ``--tokens 64``, ``--prompt-tokens 400``,
``--threads 0``: every core).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# keep bench/ off the import path (bench/core.py would shadow the core package)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from bots.models import local_weights, weights_folder  # noqa: E402
from bots.settings import Settings  # noqa: E402
from core.models.auto import usable_cores  # noqa: E402
from core.models.llama_server import import_xllamacpp, server_params  # noqa: E402
from core.models.weights import prepare  # noqa: E402

__all__ = ("main",)

TOPICS = ("a dragon", "a lighthouse", "a lost key", "a storm", "a garden", "a train", "a clock", "a river")
"""What each slot is asked to write about (a different prompt per slot, so that none shares another's cache)."""


def _weights(model: str) -> Path:
    if model:
        return Path(model).expanduser()
    settings = Settings()
    weights, _ = local_weights(settings.llm, settings.bot.data_dir)
    return prepare(weights, weights_folder(settings.llm, settings.bot.data_dir, weights.filename))


def _server(path: Path, *, slots: int, threads: int) -> Any:
    xllamacpp = import_xllamacpp("bench/batching.py needs xllamacpp: run make install")
    params = server_params(xllamacpp, path, threads=threads)
    params.n_parallel = slots
    params.cont_batching = True
    params.n_ctx = 2048 * slots
    params.kv_unified = False
    return xllamacpp.Server(params)


def _at_once(jobs: Sequence[Callable[[], Any]]) -> float:
    """Seconds until every job, each in a thread of its own (llama.cpp batches them), has ended."""
    threads = [threading.Thread(target=job) for job in jobs]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def _write(server: Any, slot: int, tokens: int) -> Callable[[], Any]:
    body = {
        "messages": [{"role": "user", "content": f"Write a long story about {TOPICS[slot % len(TOPICS)]}."}],
        "max_tokens": tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "cache_prompt": True,
        "id_slot": slot,
        "stream": False,
    }
    return lambda: server.handle_chat_completions(body)


def _evaluate(server: Any, slot: int, words: int, run: int) -> Callable[[], Any]:
    # numbered per run and slot, so that no prompt is in any slot's cache
    text = " ".join(f"{TOPICS[(slot + i) % len(TOPICS)]} {run}.{slot}.{i}" for i in range(words // 6))
    body = {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 1,
        "temperature": 0.0,
        "cache_prompt": False,
        "id_slot": slot,
        "stream": False,
    }
    return lambda: server.handle_chat_completions(body)


def _line(what: str, ones: Sequence[float], alls: Sequence[float], parallel: int) -> str:
    one, together = statistics.median(ones), statistics.median(alls)
    return (
        f"{what}: one slot {one:.2f} s, {parallel} at once {together:.2f} s: "
        f"{together / one:.2f}x the time for {parallel}x the work (1.0: the batch is free; {parallel}.0: it buys nothing)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=4, help="slots written at once")
    parser.add_argument("--tokens", type=int, default=64, help="tokens each slot writes")
    parser.add_argument("--prompt-tokens", type=int, default=400, help="about so many tokens of prompt per slot")
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp's threads (0: every core)")
    parser.add_argument("--model", default="", help="a GGUF file instead of the weights make run loads")
    opts = parser.parse_args(argv)
    threads = opts.threads or usable_cores()
    path = _weights(opts.model)
    server = _server(path, slots=opts.parallel, threads=threads)
    slots = range(opts.parallel)
    _at_once([_write(server, slot, 1) for slot in slots])  # every slot's short prompt in its cache
    print(f"{path.name}, {threads} threads, {opts.parallel} slots", flush=True)
    written: tuple[list[float], list[float]] = ([], [])
    evaluated: tuple[list[float], list[float]] = ([], [])
    for run in range(opts.runs):
        written[0].append(_at_once([_write(server, 0, opts.tokens)]))
        written[1].append(_at_once([_write(server, slot, opts.tokens) for slot in slots]))
        evaluated[0].append(_at_once([_evaluate(server, 0, opts.prompt_tokens, 2 * run)]))
        evaluated[1].append(_at_once([_evaluate(server, slot, opts.prompt_tokens, 2 * run + 1) for slot in slots]))
        print(
            f"run {run + 1}: writing {written[0][-1]:.2f} s / {written[1][-1]:.2f} s, "
            f"evaluating {evaluated[0][-1]:.2f} s / {evaluated[1][-1]:.2f} s",
            flush=True,
        )
    print(_line(f"writing {opts.tokens} tokens", *written, opts.parallel))
    print(_line(f"evaluating a prompt of ~{opts.prompt_tokens} tokens", *evaluated, opts.parallel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
