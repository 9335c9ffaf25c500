"""The embedded model's warmed slots kept on disk, so that a new process restores them instead of evaluating them.

Warming up (``LocalModel.warm``) evaluates a few long prompts (the decision's worked examples, a tool call's prompt,
the system prompt): some 1,300 tokens, 10 to 25 seconds of a start on two cores. llama.cpp can save a slot's state
(its tokens and their KV cache) to a file and restore it into a slot, in milliseconds. Each warmed prompt is saved
in a folder next to the assembled weights (``warm-slots``; in the user's cache folder where the weights' folder is
read-only), under a key that is the hash of everything that decides
the state: the model file's identity, the request body as evaluated, the context and batch settings, the llama.cpp
build (``Identity``). The next start with the same key restores the file instead of evaluating the prompt.

A file's name is ``<key>-<sha256 of its bytes>.slot``: it is written under a temporary name and renamed, so two
processes starting at once never read a half-written file; it is copied into the process's own folder, where
llama.cpp reads it, and checked there against its name, so a damaged file is never restored (llama.cpp checks
a file's header and sizes, not its values). A
file that is missing, damaged or refused is a miss: the prompt is evaluated, as without the cache, and saved again.
The folder keeps the ``KEEP`` most recently used files (a hit counts as a use) and at most ``KEEP_BYTES``.

Processes that start at once with the same bot (a gateway's workers, a restart of several) would each evaluate the
same prompts, side by side on the same cores: a process about to evaluate a key's prompt first claims the key
(``claim``: an advisory lock on ``<key>.lock`` in the folder), and one that finds the key claimed waits for that
evaluation (at most ``CLAIM_WAIT`` seconds) and restores its file instead. A process that dies while evaluating
drops its claim with it.

Everything here is blocking file work: callers run it in a thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .claims import Claim, claim

__all__ = ("CLAIM_WAIT", "FOLDER", "KEEP", "KEEP_BYTES", "Identity", "SlotCache", "writable_folder")

log = logging.getLogger(__name__)

FOLDER = "warm-slots"
"""The cache's folder inside the weights folder (``LLM_WEIGHTS_DIR``)."""
KEEP = 24
"""Files kept at most, the most recently used (a bot's start uses two or three)."""
KEEP_BYTES = 512 * 1024 * 1024
"""Bytes kept at most (a file is some 12 KB a token of the 0.5B model: 10 MB for the decision's examples)."""
CLAIM_WAIT = 120.0
"""Seconds a start waits for another process evaluating the same prompt before it evaluates the prompt itself."""
_SUFFIX = ".slot"
_LOCK = ".lock"
_STALE_PARTIAL = 600.0
"""Seconds after which a temporary file is a leftover of a process that died while writing it."""
_FORMAT = 1
"""Raised when what a file holds or how keys are made changes: every older file is then a miss."""


@dataclass(frozen=True, kw_only=True)
class Identity:
    """What decides a warmed slot's state besides the prompt: any change makes every key new."""

    model: str
    """The model file: its SHA-256 when known (packaged weights), else its path, size and modification time."""
    llama: str
    """The xllamacpp (llama.cpp) build."""
    context_size: int
    """Tokens of one slot's KV cache."""
    slots: int
    """Slots of the server (llama.cpp splits its context among them)."""
    batch: int
    """``n_batch``: prompt tokens evaluated per decode call."""
    ubatch: int
    """``n_ubatch``: tokens per physical batch."""
    cache_types: str
    """The KV cache's number types and flash attention setting (they change the saved layout)."""
    chat_template: str
    """The chat template given from outside the file (empty: the file's own)."""


class SlotCache:
    """Saved slots of one model setup (``identity``) in ``folder``."""

    def __init__(self, folder: Path, identity: Identity) -> None:
        self.folder = folder
        """Where the files are (``<weights folder>/warm-slots``)."""
        self.identity = identity
        """What every key includes."""
        self.unwritable = False
        """A file could not be kept (a read-only folder, a full disk): the others are not tried, nor said again."""

    def key(self, body: dict[str, Any]) -> str:
        """The key of a request ``body`` as warming evaluates it (its slot number aside: any slot can restore it)."""
        described = {"format": _FORMAT, "identity": asdict(self.identity), "body": _without_slot(body)}
        text = json.dumps(described, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def fetch(self, key: str, into: Path) -> Path | None:
        """Copy the newest file of ``key`` to ``into`` (in the process's own folder, where nothing else writes), checked
        there against the hash its name holds: the cache's file, or None when there is none
        whole. A file that
        does not match is damaged: it is removed (the next save replaces it) and said once in the log."""
        try:
            found = sorted(self.folder.glob(f"{key}-*{_SUFFIX}"), key=_mtime, reverse=True)
        except OSError:
            return None
        for path in found:
            expected = path.name[len(key) + 1 : -len(_SUFFIX)]
            try:
                into.unlink(missing_ok=True)
                shutil.copyfile(path, into)
                digest = _sha256(into)
            except OSError:
                continue  # (removed meanwhile by another process keeping the folder bounded)
            if digest == expected:
                with contextlib.suppress(OSError):
                    os.utime(path)  # used: kept longer
                return path
            log.warning("the embedded model's warm cache file %s is damaged; it is removed and made again", path)
            with contextlib.suppress(OSError):
                path.unlink()
        into.unlink(missing_ok=True)
        return None

    def claim(self, key: str, *, wait: float = CLAIM_WAIT) -> Claim:
        """Claim the evaluation of ``key``'s prompt: at once when no other process holds it, else once it lets it
        go (``waited``: restore its file rather than evaluate), or after ``wait`` seconds (then evaluated here too).
        A folder where no lock can be made claims nothing and waits for nothing."""
        if self.unwritable:
            return Claim(None, waited=False)

        def waiting() -> None:
            log.info("another process is warming the embedded model's slot %s; waiting for it", key)

        return claim(self.folder / f"{key}{_LOCK}", wait=wait, on_wait=waiting)

    def forget(self, path: Path) -> None:
        """Remove the cache's file ``path`` (llama.cpp refused it: the next save replaces it)."""
        with contextlib.suppress(OSError):
            path.unlink()

    def keep(self, key: str, source: Path) -> bool:
        """Make the slot file ``source`` (saved by llama.cpp in the process's own folder) the cache's file of
        ``key``: copied under a temporary name, then renamed, so no process ever reads it half-written. (Copied, not
        linked: llama.cpp writes a slot file again in place, and through a link it would write into the cache.)
        False when it could not be (said once in the log: the next start evaluates the prompt again, and this process
        keeps no other)."""
        if self.unwritable:
            return False
        partial = self.folder / f"partial-{key}-{os.getpid()}-{time.monotonic_ns()}.tmp"
        try:
            name = f"{key}-{_sha256(source)}{_SUFFIX}"
            self.folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, partial)
            os.replace(partial, self.folder / name)
        except OSError as exc:
            log.warning(
                "the embedded model's warm cache cannot keep slots in %s (%s); every start evaluates them: make it "
                "writable or set LLM_WEIGHTS_DIR to a writable folder",
                self.folder,
                exc,
            )
            self.unwritable = True
            with contextlib.suppress(OSError):
                partial.unlink()
            return False
        self.prune()
        return True

    def prune(self) -> None:
        """Remove all but the ``KEEP`` most recently used files within ``KEEP_BYTES``, and temporary files left by
        a process that ended while writing one."""
        try:
            entries = list(self.folder.iterdir())
        except OSError:
            return
        now = time.time()
        kept, size = 0, 0
        files = sorted((p for p in entries if p.name.endswith(_SUFFIX)), key=_mtime, reverse=True)
        for path in files:
            with contextlib.suppress(OSError):
                size += path.stat().st_size
                if kept < KEEP and size <= KEEP_BYTES:
                    kept += 1
                else:
                    path.unlink()
        for path in entries:  # (a claim's lock file removed while held costs at most one evaluation twice)
            leftover = path.name.startswith("partial-") or path.name.endswith(_LOCK)
            if leftover and now - _mtime(path) > _STALE_PARTIAL:
                with contextlib.suppress(OSError):
                    path.unlink()


def writable_folder(*candidates: Path) -> Path:
    """The first of ``candidates`` this process may write in (the folder, or its nearest existing parent), else the
    first: the weights' folder, else the user's cache folder (a Docker image's weights folder is read-only)."""
    for folder in candidates:
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if existing.is_dir() and os.access(existing, os.W_OK):
            return folder
    return candidates[0]


def _without_slot(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "id_slot"}


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()
