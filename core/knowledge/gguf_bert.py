"""A BERT sentence-embedding model (safetensors weights and a WordPiece ``vocab.txt``, as the sentence-transformers
packages ship them) written as one GGUF file that llama.cpp runs as an embedding model (``general.architecture``
``bert``, mean pooling), without PyTorch.

The tensors are copied as they are (float32, row-major: GGUF lists a tensor's dimensions innermost first, so an
``[out, in]`` weight is ``[in, out]`` there); the vocabulary is written the way llama.cpp's WordPiece tokenizer
reads it: a word's first piece with ``▁`` before it, a continuation (``##ing``) without its ``##``, the bracketed
special tokens as they are. The output depends on the input bytes alone, so its SHA-256 can be pinned.

Blocking file work: callers run it in a thread.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ConfigError

__all__ = ("BertConfig", "write_gguf")

ALIGNMENT = 32
"""GGUF's default alignment of tensor data."""
_STRING, _ARRAY, _UINT32, _INT32, _FLOAT32, _BOOL = 8, 9, 4, 5, 6, 7
_F32 = 0
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3
_SPECIAL = {"[PAD]": "padding", "[UNK]": "unknown", "[CLS]": "cls", "[SEP]": "seperator", "[MASK]": "mask"}

_LAYER = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
_EMBEDDINGS = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.LayerNorm": "token_embd_norm",
}
_LAYER_NAME = re.compile(r"^(?:bert\.)?encoder\.layer\.(\d+)\.(.+)\.(weight|bias)$")


@dataclass(frozen=True, kw_only=True)
class BertConfig:
    """What llama.cpp needs of the model's ``config.json``."""

    name: str
    """The model's name (``general.name``)."""
    context: int
    """Positions it was trained on (``max_position_embeddings``)."""
    width: int
    """Hidden size."""
    feed_forward: int
    """Intermediate size."""
    layers: int
    """Encoder layers."""
    heads: int
    """Attention heads."""
    epsilon: float
    """Layer norm epsilon."""


def _gguf_name(name: str) -> str | None:
    """The llama.cpp name of the safetensors tensor ``name`` (None: not used, such as ``position_ids``)."""
    plain = name.removeprefix("bert.")
    for prefix, target in _EMBEDDINGS.items():
        if plain in (f"{prefix}.weight", f"{prefix}.bias"):
            return f"{target}.{plain.rsplit('.', 1)[1]}"
    found = _LAYER_NAME.match(name)
    if found is not None and found.group(2) in _LAYER:
        return f"blk.{found.group(1)}.{_LAYER[found.group(2)]}.{found.group(3)}"
    return None


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, kind: int, value: Any) -> bytes:
    head = _string(key) + struct.pack("<I", kind)
    if kind == _STRING:
        return head + _string(value)
    if kind == _UINT32:
        return head + struct.pack("<I", value)
    if kind == _FLOAT32:
        return head + struct.pack("<f", value)
    if kind == _BOOL:
        return head + struct.pack("<?", value)
    raise AssertionError(kind)


def _array(key: str, kind: int, values: Sequence[Any]) -> bytes:
    head = _string(key) + struct.pack("<IIQ", _ARRAY, kind, len(values))
    if kind == _STRING:
        return head + b"".join(_string(v) for v in values)
    return head + struct.pack(f"<{len(values)}i", *values)


def _pieces(vocab: Sequence[str]) -> list[str]:
    """The vocabulary as llama.cpp's WordPiece tokenizer reads it."""
    return [
        t if t.startswith("[") and t.endswith("]") else t[2:] if t.startswith("##") else "\u2581" + t for t in vocab
    ]


def _metadata(config: BertConfig, vocab: Sequence[str]) -> list[bytes]:
    ids = {role: vocab.index(token) for token, role in _SPECIAL.items() if token in vocab}
    if set(ids) != set(_SPECIAL.values()):
        raise ConfigError(f"the vocabulary lacks special tokens: {sorted(set(_SPECIAL) - set(vocab))}")
    types = [_UNKNOWN if t == "[UNK]" else _CONTROL if t in _SPECIAL else _NORMAL for t in vocab]
    found = [
        _kv("general.architecture", _STRING, "bert"),
        _kv("general.name", _STRING, config.name),
        _kv("general.file_type", _UINT32, 0),
        _kv("general.alignment", _UINT32, ALIGNMENT),
        _kv("bert.context_length", _UINT32, config.context),
        _kv("bert.embedding_length", _UINT32, config.width),
        _kv("bert.feed_forward_length", _UINT32, config.feed_forward),
        _kv("bert.block_count", _UINT32, config.layers),
        _kv("bert.attention.head_count", _UINT32, config.heads),
        _kv("bert.attention.layer_norm_epsilon", _FLOAT32, config.epsilon),
        _kv("bert.attention.causal", _BOOL, False),
        _kv("bert.pooling_type", _UINT32, 1),  # mean, as sentence-transformers pools these models
        _kv("tokenizer.ggml.model", _STRING, "bert"),
        _array("tokenizer.ggml.tokens", _STRING, _pieces(vocab)),
        _array("tokenizer.ggml.token_type", _INT32, types),
        _kv("tokenizer.ggml.token_type_count", _UINT32, 2),
        _kv("tokenizer.ggml.bos_token_id", _UINT32, ids["cls"]),
        _kv("tokenizer.ggml.add_bos_token", _BOOL, True),
        _kv("tokenizer.ggml.add_eos_token", _BOOL, True),
    ]
    found.extend(_kv(f"tokenizer.ggml.{role}_token_id", _UINT32, ids[role]) for role in _SPECIAL.values())
    return found


def _read_header(source: BinaryIO) -> tuple[int, dict[str, Any]]:
    (size,) = struct.unpack("<Q", source.read(8))
    if size > 10_000_000:
        raise ConfigError("the safetensors header is too large: not a model file")
    header: dict[str, Any] = json.loads(source.read(size))
    return 8 + size, header


def write_gguf(*, safetensors: Path, vocab: Path, config: BertConfig, target: Path) -> None:
    """Write the GGUF file of the BERT model in ``safetensors`` (float32 tensors) and ``vocab`` to ``target``
    (through a temporary file beside it, renamed when complete)."""
    words = vocab.read_text(encoding="utf-8").splitlines()
    with safetensors.open("rb") as source:
        start, header = _read_header(source)
        tensors: list[tuple[str, list[int], int, int]] = []  # gguf name, gguf dims, data offset, bytes
        for name, info in sorted(header.items()):
            target_name = _gguf_name(name) if isinstance(info, Mapping) else None
            if target_name is None:
                continue
            if info["dtype"] != "F32":
                raise ConfigError(f"{safetensors.name}: {name} is {info['dtype']}, only float32 is converted")
            begin, end = info["data_offsets"]
            tensors.append((target_name, list(reversed(info["shape"])), start + begin, end - begin))
        expected = 5 + 16 * config.layers  # embeddings (4 tensors and a bias) and 16 per layer
        if len(tensors) != expected:
            raise ConfigError(f"{safetensors.name} holds {len(tensors)} BERT tensors, not {expected}")
        meta = _metadata(config, words)
        infos = bytearray()
        offset = 0
        for name, dims, _, size in tensors:
            infos += _string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
            infos += struct.pack("<IQ", _F32, offset)
            offset += -(-size // ALIGNMENT) * ALIGNMENT
        partial = target.with_name(target.name + ".partial")
        with partial.open("wb") as out:
            out.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)))
            for item in meta:
                out.write(item)
            out.write(infos)
            out.write(b"\0" * (-out.tell() % ALIGNMENT))
            for _, _, at, size in tensors:
                source.seek(at)
                out.write(source.read(size))
                out.write(b"\0" * (-size % ALIGNMENT))
        partial.replace(target)
