"""Installing skills (``bots skills add PATH|URL``): a folder, or a ``.zip`` / ``.tar.gz`` archive on disk or at an
``http(s)`` URL, copied into ``SKILLS_DIR/<name>`` and pinned in ``skills.lock`` by the hash of its files (and, for an
archive, of the archive: ``--sha256`` checks it before anything is unpacked)."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .skill import SkillError, read_lock, read_skill, tree_hash, write_lock

__all__ = ("Installed", "add_skill", "remove_skill")

MAX_ARCHIVE_BYTES = 50_000_000
"""The largest archive ``add_skill`` downloads or unpacks."""


@dataclass(frozen=True, kw_only=True)
class Installed:
    """A skill ``add_skill`` installed."""

    name: str
    sha256: str
    """The hash of its files, as pinned."""
    replaced: bool
    """A skill of that name was installed before and was replaced."""


def _download(url: str) -> bytes:
    import httpx

    try:
        with httpx.Client(timeout=30.0, follow_redirects=True) as client, client.stream("GET", url) as response:
            response.raise_for_status()
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_ARCHIVE_BYTES:
                    raise SkillError(f"the archive at {url} is larger than {MAX_ARCHIVE_BYTES // 1_000_000} MB")
                chunks.append(chunk)
    except httpx.HTTPError as exc:
        raise SkillError(f"could not download {url}: {exc}") from None
    return b"".join(chunks)


def _unpack(data: bytes, name: str, into: Path) -> None:
    """Unpack the archive ``data`` (zip or tar, by its content) into ``into``, refusing paths that leave it."""
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                parts = PurePosixPath(info.filename).parts
                if info.filename.startswith("/") or ".." in parts:
                    raise SkillError(f"{name} holds a path outside its folder: {info.filename!r}")
                if (info.external_attr >> 16) & 0o170000 == 0o120000:
                    raise SkillError(f"{name} holds a symbolic link: {info.filename!r}")
            archive.extractall(into)
        return
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            archive.extractall(into, filter="data")  # no links out, no devices, no absolute paths
    except (tarfile.TarError, OSError) as exc:
        raise SkillError(f"{name} is neither a zip nor a tar archive that unpacks safely: {exc}") from None


def _skill_folder(root: Path) -> Path:
    """The folder holding SKILL.md in an unpacked archive: its top, or its one folder."""
    if (root / "SKILL.md").is_file():
        return root
    entries = [p for p in root.iterdir() if not p.name.startswith(".") and p.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / "SKILL.md").is_file():
        return entries[0]
    raise SkillError("the archive has no SKILL.md at its top or in its one folder")


def add_skill(source: str, root: Path, *, sha256: str | None = None) -> Installed:
    """Install the skill at ``source`` (a folder, an archive file, or an http(s) URL of an archive) under ``root`` and
    pin it. ``sha256``: the archive's (or, for a folder, its files') expected hash; a mismatch installs nothing."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=root, prefix=".adding-") as tmp:
        work = Path(tmp)
        if source.startswith(("http://", "https://")):
            data = _download(source)
        elif Path(source).is_dir():
            data = b""
            shutil.copytree(source, work / "skill", symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".git"))
        elif Path(source).is_file():
            data = Path(source).read_bytes()
        else:
            raise SkillError(f"{source} is not a folder, an archive or an http(s) URL")
        archive_hash = hashlib.sha256(data).hexdigest() if data else None
        if data:
            if sha256 is not None and archive_hash != sha256.lower():
                raise SkillError(f"{source}: the archive's SHA-256 is {archive_hash}, not {sha256}; nothing installed")
            (work / "skill").mkdir()
            _unpack(data, source, work / "skill")
        folder = _skill_folder(work / "skill")
        skill = read_skill(folder)
        files_hash = tree_hash(folder)
        if sha256 is not None and archive_hash is None and files_hash != sha256.lower():
            raise SkillError(f"{source}: the files' SHA-256 is {files_hash}, not {sha256}; nothing installed")
        target = root / skill.name
        pins = read_lock(root)
        replaced = target.exists()
        if replaced:
            shutil.rmtree(target)
        folder.rename(target)
        pin = {"source": source, "sha256": files_hash}
        if archive_hash is not None:
            pin["archive_sha256"] = archive_hash
        pins[skill.name] = pin
        write_lock(root, pins)
    return Installed(name=skill.name, sha256=files_hash, replaced=replaced)


def remove_skill(name: str, root: Path) -> bool:
    """Uninstall ``name``; False when it was not installed."""
    pins = read_lock(root)
    target = root / name
    known = name in pins or target.is_dir()
    if target.is_dir() and target.parent == root:
        shutil.rmtree(target)
    if pins.pop(name, None) is not None:
        write_lock(root, pins)
    return known
