"""A Gemma GGUF file without a chat template gets Gemma's; a file with its own keeps it."""

from __future__ import annotations

import struct
from pathlib import Path

from core.models.gguf import GEMMA_TEMPLATE, gguf_chat_template

from .support import smollm2_path


def _text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("<Q", len(data)) + data


def _gguf(path: Path, entries: list[tuple[str, int, bytes]]) -> Path:
    body = b"".join(_text(key) + struct.pack("<I", kind) + value for key, kind, value in entries)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries)) + body)
    return path


def test_a_gemma_file_without_a_template_gets_gemmas(tmp_path: Path) -> None:
    tokens = struct.pack("<IQ", 8, 3) + _text("<pad>") + _text("<start_of_turn>") + _text("<end_of_turn>")
    scores = struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0.0, 0.0, 0.0)
    path = _gguf(
        tmp_path / "gemma.gguf",
        [
            ("general.architecture", 8, _text("gemma3")),
            ("gemma3.block_count", 4, struct.pack("<I", 18)),
            ("tokenizer.ggml.tokens", 9, tokens),
            ("tokenizer.ggml.scores", 9, scores),
        ],
    )
    assert gguf_chat_template(path) == GEMMA_TEMPLATE
    assert "<start_of_turn>model" in GEMMA_TEMPLATE and "<end_of_turn>" in GEMMA_TEMPLATE


def test_a_file_with_its_own_template_or_another_model_is_left_alone(tmp_path: Path) -> None:
    own = _gguf(
        tmp_path / "own.gguf",
        [("general.architecture", 8, _text("gemma3")), ("tokenizer.chat_template", 8, _text("{{ messages }}"))],
    )
    assert gguf_chat_template(own) is None
    assert gguf_chat_template(_gguf(tmp_path / "llama.gguf", [("general.architecture", 8, _text("llama"))])) is None
    assert gguf_chat_template(tmp_path / "missing.gguf") is None
    (tmp_path / "junk.gguf").write_bytes(b"GGUF\x03")
    assert gguf_chat_template(tmp_path / "junk.gguf") is None
    path = smollm2_path()
    assert path is not None and gguf_chat_template(path) is None, "SmolLM2 ships its own template"
