"""llama.cpp in this process through xllamacpp, set up alike for the chat model (``core.models.local``) and the
knowledge base's embeddings (``core.knowledge.local_embedder``): imported with its OpenMP threads told to sleep, and
its server's parameters quiet, without warm-up or fitting to memory, on the threads given, its own HTTP endpoint on
a random loopback port locked with a key nobody knows."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ("import_xllamacpp", "server_params")


def import_xllamacpp(missing: str) -> Any:
    """The xllamacpp module; ``ConfigError(missing)`` (what needs it and how to install it) when it is not there."""
    # llama.cpp's OpenMP threads spin between tokens unless told to sleep; a bot shares its cores with the event loop
    # and other processes, and spinning made generation 4-10x slower under load
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import xllamacpp
    except ImportError as exc:
        raise ConfigError(missing) from exc
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
