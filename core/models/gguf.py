"""GGUF files on disk: where a package is installed, the header check, and the metadata the embedded model reads
(its chat template, whether that template writes tool calls)."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

from ..errors import ConfigError
from .grammar import TOOL_CALL_OPEN

__all__ = (
    "GEMMA_TEMPLATE",
    "calls_tools",
    "check_gguf",
    "gguf_chat_template",
    "package_folders",
)


def package_folders(module: str) -> list[Path]:
    """Where ``module`` is installed (a namespace package may have several folders), found without importing it;
    empty when it is not installed."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    return [Path(folder) for folder in folders]


def check_gguf(path: Path) -> None:
    """Raise ``ConfigError`` unless ``path`` is a readable GGUF file (llama.cpp may abort on anything else)."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise ConfigError(f"LLM_MODEL_PATH={path} does not exist: point it at a .gguf model file") from None
    except IsADirectoryError:
        raise ConfigError(f"LLM_MODEL_PATH={path} is a folder: point it at a .gguf model file") from None
    except OSError as exc:
        raise ConfigError(f"LLM_MODEL_PATH={path} cannot be read ({exc.strerror}): check its permissions") from None
    if magic != b"GGUF":
        raise ConfigError(f"LLM_MODEL_PATH={path} is not a GGUF file: llama.cpp only runs .gguf models")


GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set first = messages[0]['content'] + '\\n\\n' %}"
    "{% set rest = messages[1:] %}{% else %}{% set first = '' %}{% set rest = messages %}{% endif %}"
    "{% for message in rest %}{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + (first if loop.first else '') + message['content'] | trim }}"
    "{{ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)
"""Gemma's chat template, for a Gemma GGUF file that lacks one (llama.cpp would fall back to ChatML)."""


def gguf_chat_template(path: Path) -> str | None:
    """The chat template a GGUF file needs from outside: None when it has its own (or is not recognised),
    Gemma's when it is a Gemma model without one. Reads only the file's metadata."""
    meta = _gguf_metadata(path, ("general.architecture", "tokenizer.chat_template"))
    if meta.get("tokenizer.chat_template"):
        return None
    if str(meta.get("general.architecture", "")).startswith("gemma"):
        return GEMMA_TEMPLATE
    return None


def _gguf_metadata(path: Path, keys: tuple[str, ...]) -> dict[str, object]:
    """The string values of ``keys`` in a GGUF file's header (arrays are skipped)."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    found: dict[str, object] = {}
    try:
        with path.open("rb") as f:
            if f.read(4) != b"GGUF":
                return found
            _version, _tensors, count = struct.unpack("<IQQ", f.read(20))

            def text() -> str:
                (n,) = struct.unpack("<Q", f.read(8))
                return f.read(n).decode("utf-8", "replace")

            def skip(kind: int) -> None:
                if kind == 8:
                    (n,) = struct.unpack("<Q", f.read(8))
                    f.seek(n, 1)
                elif kind == 9:
                    item, n = struct.unpack("<IQ", f.read(12))
                    if item in sizes:
                        f.seek(sizes[item] * n, 1)
                    else:
                        for _ in range(n):
                            skip(item)
                else:
                    f.seek(sizes[kind], 1)

            for _ in range(count):
                key = text()
                (kind,) = struct.unpack("<I", f.read(4))
                if key in keys and kind == 8:
                    found[key] = text()
                else:
                    skip(kind)
    except (OSError, struct.error, KeyError):
        pass
    return found


def calls_tools(path: Path) -> bool:
    """True when the GGUF file's chat template writes tool calls in the Hermes format (``<tool_call>``), the
    one ``grammar.tool_call_grammar`` constrains. Reads only the file's metadata."""
    template = _gguf_metadata(path, ("tokenizer.chat_template",)).get("tokenizer.chat_template")
    return isinstance(template, str) and TOOL_CALL_OPEN in template and "tools" in template
