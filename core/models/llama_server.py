"""llama.cpp in this process through xllamacpp, set up alike for the chat model (``core.models.local``) and the
knowledge base's embeddings (``core.knowledge.local_embedder``): imported with its OpenMP threads told to sleep (or,
for a chat model on a machine of its own, to spin), and its server's parameters quiet, without warm-up or fitting to
memory, on the threads given, its own HTTP endpoint on a random loopback port locked with a key nobody knows."""

from __future__ import annotations

import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ("import_xllamacpp", "server_params")

log = logging.getLogger(__name__)

_first_policy: str | None = None
"""``OMP_WAIT_POLICY`` when ``import_xllamacpp`` first imported xllamacpp: OpenMP (libgomp, loaded with it) reads
the variable then and never again, so a later call asking for another policy gets this one."""


def import_xllamacpp(missing: str, *, spin: bool = False) -> Any:
    """The xllamacpp module; ``ConfigError(missing)`` (what needs it and how to install it) when it is not there.

    ``spin`` (``LLM_THREADS_WAIT=spin``) has llama.cpp's threads spin at the barrier between the operations of each
    token instead of sleeping there: about twice the tokens per second on an idle machine (30-33 against 14-16 on
    two cores), several times slower, or stalled, when other work keeps the cores busy. Only the first import of
    the process decides; a later call that asks for the other policy is warned about."""
    global _first_policy
    # llama.cpp's OpenMP threads spin between tokens unless told to sleep; a bot shares its cores with the event loop
    # and other processes, and spinning made generation 4-10x slower under load. Without spin an operator's own
    # OMP_WAIT_POLICY stands
    if spin:
        os.environ["OMP_WAIT_POLICY"] = "ACTIVE"
    else:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    asked = os.environ["OMP_WAIT_POLICY"]
    if "xllamacpp" in sys.modules and _first_policy is not None and asked.upper() != _first_policy.upper():
        log.warning(
            "llama.cpp's threads already wait with OMP_WAIT_POLICY=%s in this process (OpenMP reads it once, when "
            "llama.cpp is first loaded): LLM_THREADS_WAIT=%s takes effect at the next start",
            _first_policy,
            "spin" if spin else "sleep",
        )
    try:
        import xllamacpp
    except ImportError as exc:
        raise ConfigError(missing) from exc
    if _first_policy is None:
        _first_policy = asked
    return xllamacpp


def server_params(xllamacpp: Any, path: Path, *, threads: int) -> Any:
    """``CommonParams`` for the model at ``path`` on ``threads`` threads; the caller sets what its use needs."""
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False
    # llama.cpp fits unset settings to the devices' memory by loading the model's description a second time first:
    # about 3 s of every start on two cores, for nothing on a CPU (the context size is always set)
    params.fit_params = False
    params.verbosity = -1
    # llama.cpp also opens an HTTP endpoint on a random loopback port; lock it with a key nobody knows
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.api_keys = [secrets.token_urlsafe(32)]
    return params
