"""The model the ``LLM_*`` settings ask for (a chain of models with ``LLM_FALLBACKS``), or a ``ConfigError`` naming
the variable to fix."""

from __future__ import annotations

import html
import importlib.util
import inspect
import logging
import sys
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import ConfigError
from core.models import BreakerPolicy, FallbackModel, Model, ModelRequest, Preloads, ScriptedModel
from core.models.retry import RetryPolicy

from .settings import FallbackEntry, LlmProvider, LlmSettings, LocalWeights
from .warmup import first_request

if TYPE_CHECKING:
    from core import Agent
    from core.models.weights import Weights

__all__ = (
    "SCRIPTED_REPLY",
    "build_model",
    "chain_problems",
    "close_model",
    "local_weights",
    "model_lines",
    "open_model",
)

log = logging.getLogger(__name__)

SCRIPTED_REPLY = "Hello! I am up and running (LLM_PROVIDER=scripted, so this is a fixed reply)."
"""What the scripted provider always answers."""


def build_model(llm: LlmSettings, *, data_dir: Path | None = None) -> Model:
    """Build the model of ``llm``; a bad combination raises ``ConfigError`` with one line naming the variable.
    The local model's weights are assembled under ``LLM_WEIGHTS_DIR`` (``weights_folder``).

    With ``LLM_FALLBACKS``, a ``FallbackModel``: ``LLM_PROVIDER``'s model first, then each entry; every model
    but the last hands a failed message to the next at once (no retries of its own: the next model is the
    retry), and each has ``LLM_TIMEOUT`` seconds for its first chunk."""
    if not llm.fallbacks:
        return _build_one(llm, data_dir)
    problems = chain_problems(llm)
    if problems:
        raise ConfigError(problems[0])
    members = [_build_one(llm.model_copy(update={"retries": 0}), data_dir)]
    for number, entry in enumerate(llm.fallbacks, start=1):
        last = number == len(llm.fallbacks)
        entry_llm = _entry_settings(llm, entry, last=last)
        try:
            members.append(_build_one(entry_llm, data_dir))
        except ConfigError as exc:
            raise ConfigError(f"LLM_FALLBACKS entry {number} ({entry}): {exc}") from exc
    breaker = BreakerPolicy(failures=llm.breaker_failures, window=llm.breaker_window, pause=llm.breaker_pause)
    return FallbackModel(members, breaker=breaker, timeout=llm.timeout)


def chain_problems(llm: LlmSettings) -> list[str]:
    """What ``build_model`` would refuse in ``LLM_FALLBACKS``, one line each (``bots config``), without building
    anything."""
    problems = []
    if sum(1 for e in llm.fallbacks if e.provider is LlmProvider.LOCAL) + (llm.provider is LlmProvider.LOCAL) > 1:
        problems.append("LLM_FALLBACKS names the embedded model (local) twice: keep it once, last in the chain")
    for number, entry in enumerate(llm.fallbacks, start=1):
        try:
            _entry_settings(llm, entry, last=number == len(llm.fallbacks))
        except ConfigError as exc:
            problems.append(f"LLM_FALLBACKS entry {number} ({entry}): {exc}")
    return problems


def _entry_settings(llm: LlmSettings, entry: FallbackEntry, *, last: bool) -> LlmSettings:
    """``llm`` as one entry of ``LLM_FALLBACKS`` asks for it: LLM_API_KEY goes only to the same provider at the
    same URL (another server never sees it)."""
    base_url = (entry.base_url or "").strip() or None
    key = entry.api_key
    same_server = entry.provider is llm.provider and base_url == ((llm.base_url or "").strip() or None)
    if key is None and same_server:
        key = llm.api_key
    if entry.provider is LlmProvider.OPENAI and key is None and base_url is None:
        raise ConfigError(
            'needs an api_key for api.openai.com: give it in the JSON form, [{"provider": "openai", "model": '
            '"gpt-4o-mini", "api_key": "${OPENAI_API_KEY}"}], or a base_url (openai:MODEL@http://host/v1)'
        )
    if entry.provider is LlmProvider.ANTHROPIC and key is None:
        raise ConfigError(
            'needs an api_key: give it in the JSON form, [{"provider": "anthropic", "api_key": "${ANTHROPIC_API_KEY}"}]'
        )
    if entry.provider is LlmProvider.OPENAI and base_url is not None and not entry.model.strip():
        raise ConfigError(f"names no model: write the one served at {base_url} (openai:llama3.2@{base_url})")
    return llm.model_copy(
        update={
            "provider": entry.provider,
            "model": entry.model,
            "base_url": base_url,
            "api_key": key,
            "vision": llm.vision if entry.vision is None else entry.vision,
            "retries": llm.retries if last else 0,
            "fallbacks": (),
        }
    )


def _build_one(llm: LlmSettings, data_dir: Path | None) -> Model:
    provider = LlmProvider(llm.provider)
    key = llm.api_key.get_secret_value().strip() if llm.api_key is not None else ""
    base_url = (llm.base_url or "").strip() or None
    if base_url is not None and provider in (LlmProvider.OPENAI, LlmProvider.ANTHROPIC):
        _check_url(base_url)
    retry = RetryPolicy(retries=llm.retries)
    if provider is LlmProvider.SCRIPTED:
        return ScriptedModel(_scripted_reply, keep=0)  # a bot that runs for days keeps no prompts
    if provider is LlmProvider.OPENAI:
        from core.models.openai_compat import DEFAULT_OPENAI_MODEL, OpenAICompatModel

        if not key and base_url is None:
            raise ConfigError(
                "LLM_PROVIDER=openai needs LLM_API_KEY (for api.openai.com) or LLM_BASE_URL "
                "(for a server such as vLLM, Ollama or llama.cpp)"
            )
        model = llm.model.strip()
        if not model:
            if base_url is not None:
                raise ConfigError(
                    f"LLM_MODEL is empty: set the name of a model served at {base_url} (e.g. LLM_MODEL=llama3.2)"
                )
            model = DEFAULT_OPENAI_MODEL
        return OpenAICompatModel(
            model=model,
            api_key=key or None,
            base_url=base_url,
            temperature=llm.temperature,
            timeout=llm.timeout,
            retry=retry,
            vision=llm.vision,
        )
    if provider is LlmProvider.ANTHROPIC:
        from core.models.anthropic_api import DEFAULT_ANTHROPIC_MODEL, AnthropicModel

        if not key:
            raise ConfigError("LLM_PROVIDER=anthropic needs LLM_API_KEY: set it to an Anthropic API key")
        return AnthropicModel(
            api_key=key,
            model=llm.model.strip() or DEFAULT_ANTHROPIC_MODEL,
            base_url=base_url,
            timeout=llm.timeout,
            retry=retry,
            vision=llm.vision,
        )
    return _build_local(llm, data_dir)


def _build_local(llm: LlmSettings, data_dir: Path | None = None) -> Model:
    from core.models.local import LocalModel, check_gguf

    if importlib.util.find_spec("xllamacpp") is None:
        raise ConfigError(
            "LLM_PROVIDER=local needs xllamacpp: run pip install '.[local]' (or choose LLM_PROVIDER=openai)"
        )
    options: dict[str, Any] = {
        "context_size": llm.context_size,
        "threads": llm.threads,
        "spin": llm.threads_wait == "spin",
        "temperature": llm.temperature,
        "slots": llm.slots,
        "seed": llm.seed,
        "progress": _progress_line,
    }
    if llm.model_path is not None:
        path = llm.model_path.expanduser()
        check_gguf(path)
        return LocalModel(model_path=path, **options)
    weights, why = local_weights(llm, data_dir)
    if llm.local_model == LocalWeights.AUTO:  # which weights and why, as bots config says it
        _progress_line(why)
    folder = weights_folder(llm, data_dir or Path("data"), weights.filename)
    model = LocalModel(weights=weights, weights_dir=folder, **options)
    missing = model.ready()
    if isinstance(missing, str):  # a missing package is said now, with the install command
        raise ConfigError(missing)
    return model


def local_weights(llm: LlmSettings, data_dir: Path | None = None) -> tuple[Weights, str]:
    """The weights ``LLM_LOCAL_MODEL`` names and what chose them, in words: for ``auto`` (the default) the machine
    (its cores, within ``LLM_THREADS``, and memory) and whether the 1.5B is installed, as
    ``core.models.auto.pick_weights`` weighs them (``auto -> qwen2.5-0.5b: 2 cores (the 1.5B needs 6 cores)``)."""
    from core.models.auto import machine, pick_weights
    from core.models.weights import CHOICES, LARGER, missing

    if llm.local_model != LocalWeights.AUTO:
        weights = CHOICES[str(llm.local_model)]
        return weights, f"chosen by LLM_LOCAL_MODEL={weights.name}"
    found = machine()
    cores = min(found.cores, llm.threads) if llm.threads else found.cores
    folder = weights_folder(llm, data_dir or Path("data"), LARGER.filename)
    pick = pick_weights(cores=cores, available=found.available, larger_installed=missing(LARGER, folder) is None)
    return pick.weights, pick.reason


def model_lines(llm: LlmSettings, *, data_dir: Path | None = None) -> list[str]:
    """Which model answers and why, for ``bots config``: the provider's model, or for the embedded one its weights,
    what chose them (``LLM_MODEL_PATH``, ``LLM_LOCAL_MODEL``, or ``auto`` with the machine it saw and what the
    weights were measured against) and how it runs (threads, conversations kept warm at once)."""
    provider = LlmProvider(llm.provider)
    if provider is not LlmProvider.LOCAL:
        return [f"{provider.value}: {llm.model.strip() or 'the provider default'}"]
    from core.models.auto import usable_cores

    threads = llm.threads or usable_cores()
    runs = f"{threads} threads, {llm.slots} conversations at once (LLM_THREADS, LLM_SLOTS)"
    if llm.model_path is not None:
        return [f"embedded: {Path(llm.model_path).name}, named by LLM_MODEL_PATH; {runs}"]
    weights, why = local_weights(llm, data_dir)
    size = f"{weights.size // 1_000_000} MB, {weights.license}"
    if llm.local_model == LocalWeights.AUTO:
        why = f"the default, {why}; {weights.measured}"
    return [f"embedded: {weights.title} ({size}), {why}", runs]


def _progress_line(line: str) -> None:
    """What loading the local model is doing: on the terminal (the terminal chat shows it before its first
    prompt), else in the log."""
    if sys.stderr.isatty():
        print(f"bots: {line}", file=sys.stderr, flush=True)
    else:
        log.info("local model: %s", line)


async def open_model(model: Model, agent: Agent | None = None) -> None:
    """Get the model ready before the first message: the embedded model assembles, checks and loads its
    weights (in a thread, saying how far it is), then evaluates what the first answer of ``agent``'s main
    conversation needs (``bots.warmup``), so the bot is ready only once the model answers as fast as it will
    later; a hosted model imports its SDK in a thread meanwhile (``preload``: the platforms connect, the first
    request waits for it if it comes first)."""
    for member in model.models if isinstance(model, FallbackModel) else [model]:
        if isinstance(member, Preloads):
            member.preload()
    warm = getattr(model, "warm", None)
    if warm is not None:
        request = await first_request(agent) if agent is not None else None
        await warm(request)
        return
    load = getattr(model, "load", None)
    if load is not None:
        result = load()
        if inspect.isawaitable(result):
            await result


def _check_url(url: str) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("LLM_BASE_URL is not an http(s) URL: use e.g. http://127.0.0.1:11434/v1")


def weights_folder(llm: LlmSettings, data_dir: Path, filename: str | None = None) -> Path:
    """Where the local model's (or the knowledge base's) weights are assembled: ``LLM_WEIGHTS_DIR``; else the
    folder an older release assembled ``filename`` in, ``data_dir/models``, when it is there (no second copy);
    else one folder per user shared by every bot folder (``core.models.weights.DEFAULT_WEIGHTS_DIR``)."""
    from core.models.weights import DEFAULT_WEIGHTS_DIR

    if llm.weights_dir is not None:
        return llm.weights_dir.expanduser()
    older = data_dir.expanduser() / "models"
    if filename is not None and (older / filename).is_file():
        return older
    return DEFAULT_WEIGHTS_DIR


def _scripted_reply(request: ModelRequest) -> str:
    """The fixed reply, in the response format, through the conversation's message output."""
    types = request.output_types
    if not types:
        return "<response><reasoning>no output is available to answer with</reasoning></response>"
    chosen = next((t for t in types if t.endswith(":message")), types[0])
    return (
        "<response><reasoning>scripted reply</reasoning>"
        f'<output type="{html.escape(chosen, quote=True)}">{html.escape(SCRIPTED_REPLY, quote=False)}</output>'
        "</response>"
    )


async def close_model(model: Model) -> None:
    """Release what the model holds (HTTP connections, the local weights); models without resources are left."""
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        result = aclose()
        if inspect.isawaitable(result):
            await result
        return
    close = getattr(model, "close", None)
    if close is not None:
        close()
