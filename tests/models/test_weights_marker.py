"""The assembled weights' check noted beside them (issue 47, start-up): a load of the very file that was checked
skips hashing it again; any change to the file since makes the next load check it whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.models.weights import prepare

from .test_weights import CHUNKS, fake_weights


@pytest.fixture(autouse=True)
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file is marked even when it changed a moment ago (the rule for writes in one clock tick is tested apart)."""
    monkeypatch.setattr("core.models.weights._SETTLED_NS", 0)


def steps(weights_dir: Path, weights: object, folders: dict[str, Path]) -> set[str]:
    seen: list[tuple[str, int, int]] = []
    prepare(weights, weights_dir, locate=folders.get, progress=lambda *a: seen.append(a))  # type: ignore[arg-type]
    return {step for step, _, _ in seen}


def test_a_file_checked_whole_is_not_hashed_again_until_it_changes(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    cache = tmp_path / "cache"
    assert steps(cache, weights, folders) == {"assemble"}
    assert steps(cache, weights, folders) == {"verify"}, "the first load after assembling checks it whole"
    assert (cache / ".fake.gguf.verified").is_file()
    assert steps(cache, weights, folders) == set(), "the same file: its check holds"

    path = cache / "fake.gguf"
    replaced = cache / "other"
    replaced.write_bytes(path.read_bytes())
    os.replace(replaced, path)  # the same bytes, another file
    assert steps(cache, weights, folders) == {"verify"}


def test_a_file_damaged_after_its_check_is_refused_and_assembled_again(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    cache = tmp_path / "cache"
    path = prepare(weights, cache, locate=folders.get)
    prepare(weights, cache, locate=folders.get)  # checked: marked
    assert (cache / ".fake.gguf.verified").is_file()
    with path.open("r+b") as f:
        f.truncate(len(CHUNKS[0]))  # cut short in place (a disk that filled up)
    assert steps(cache, weights, folders) == {"assemble"}, "(its size alone says it is damaged)"
    assert path.read_bytes() == b"".join(CHUNKS)


def test_a_marker_of_other_weights_is_not_trusted(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    cache = tmp_path / "cache"
    prepare(weights, cache, locate=folders.get)
    prepare(weights, cache, locate=folders.get)
    marker = cache / ".fake.gguf.verified"
    marker.write_text(marker.read_text().replace(weights.sha256, "0" * 64))
    assert steps(cache, weights, folders) == {"verify"}


def test_a_file_changed_a_moment_ago_is_not_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write in the same tick of the file system's clock keeps a file's times: a marker written just after a change
    could vouch for bytes written after the check. Such a file is checked whole until it has settled."""
    monkeypatch.setattr("core.models.weights._SETTLED_NS", 3600 * 10**9)
    weights, folders = fake_weights(tmp_path)
    cache = tmp_path / "cache"
    prepare(weights, cache, locate=folders.get)
    assert steps(cache, weights, folders) == {"verify"}
    assert steps(cache, weights, folders) == {"verify"}
    assert not (cache / ".fake.gguf.verified").exists()


def test_single_part_weights_are_still_checked_at_every_load(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path, chunks=(b"GGUF" + b"x" * 1000,))
    assert steps(tmp_path / "cache", weights, folders) == {"verify"}
    assert steps(tmp_path / "cache", weights, folders) == {"verify"}
    path = folders["pkg0"] / "data" / "part0.bin"
    path.write_bytes(b"GGUF" + b"y" * 1000)
    with pytest.raises(ConfigError, match="damaged"):
        prepare(weights, tmp_path / "cache", locate=folders.get)
