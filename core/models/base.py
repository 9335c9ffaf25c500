"""The model protocol: anything that streams text for a prompt."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..unicode_text import repair_strings, repair_text

__all__ = (
    "HoldsWeights",
    "ImagePart",
    "Model",
    "ModelRequest",
    "ModelRoute",
    "ModelUsage",
    "Preloads",
    "SelfChecking",
    "ServedOverHttp",
    "ToolSpec",
    "call_reasoning",
    "call_route",
    "call_usage",
    "closing_stream",
    "interleave",
    "report_reasoning",
    "report_usage",
    "without_images",
)


@dataclass(frozen=True, kw_only=True)
class ImagePart:
    """An image the model is shown, at a place in the prompt."""

    marker: str
    """The image belongs right after the first occurrence of this text in the prompt (its ``<attachment>``)."""
    mime: str
    """``image/jpeg``, ``image/png``, ``image/gif`` or ``image/webp``."""
    data: bytes = field(repr=False)
    """The image file."""


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """An action offered to a model that calls tools in its own chat format (the compact prompt)."""

    name: str
    """The action's name; a call comes back as ``<action_call name="...">``."""
    description: str
    """What it does and when to use it."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """The JSON Schema of its arguments (an object)."""
    output: str = ""
    """Not an action but an output offered as a tool: the argument holding its content (``text`` or
    ``content``), the others being its attributes; a call comes back as ``<output type="NAME" ...>``."""


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One call of the model."""

    system: str
    """The system part of the prompt (persona, rules, the response format)."""
    prompt: str
    """The user part of the prompt (available tools, contexts, working memory, updates)."""
    max_tokens: int = 1024
    """Upper bound on generated tokens."""
    stop: tuple[str, ...] = ("</response>",)
    """Generation stops at any of these strings."""
    output_types: tuple[str, ...] = ()
    """The output types the model may use (a constrained decoder builds its grammar from them)."""
    action_names: tuple[str, ...] = ()
    """The action names the model may call."""
    max_items: int | None = None
    """At most this many outputs and action calls, for a constrained decoder (None: its default)."""
    metadata: dict[str, str] = field(default_factory=dict)
    """Correlation data (context id) for logs."""
    images: tuple[ImagePart, ...] = ()
    """Images placed in the prompt, for a model that sees images (``vision``); others never get any."""
    plain: bool = False
    """The answer is the reply itself in plain text, not the response format (the compact prompt of small
    models): no grammar, and ``stop`` holds the starts of turns a model may go on to invent."""
    turns: tuple[tuple[str, str], ...] = ()
    """The conversation as chat messages, ``("user" | "assistant", text)``, oldest first, the last one the user's;
    a chat provider sends them after ``system`` instead of ``prompt`` (the same conversation as a transcript), so
    the model's chat template marks where each turn ends. Empty: send ``prompt``. With ``tools``, two more roles:
    ``("tool_call", '{"name": ..., "arguments": {...}}')`` (the model called a tool) and ``("tool", result)``."""
    tools: tuple[ToolSpec, ...] = ()
    """Actions the model may call in its own tool-call format (a plain request of a model that declares
    ``calls_tools = True``); the call comes back as ``<response><action_call name="...">{json}</action_call>
    </response>``, its result as a ``tool`` turn."""
    kept: str = ""
    """The part of ``system`` that shows what the conversation keeps (the compact prompt's ``render`` of the bot's
    context), as it appears there: a small model that copies it into an answer to something else is asked again
    without it (``LocalModel``). Empty: none is shown."""
    model: str | None = None
    """The model name to ask the provider for instead of the configured one (a conversation's ``/model``);
    providers serving one fixed model (local, scripted) ignore it."""

    def __post_init__(self) -> None:
        # a provider's client encodes the request: text that is not valid Unicode is repaired here, never a crash
        object.__setattr__(self, "system", repair_text(self.system))
        object.__setattr__(self, "prompt", repair_text(self.prompt))
        object.__setattr__(self, "turns", repair_strings(self.turns))


def without_images(request: ModelRequest, note: str) -> ModelRequest:
    """``request`` for a model that refused images: no images, and ``note`` in the prompt after each one's marker."""
    prompt = request.prompt
    for image in request.images:
        prompt = prompt.replace(image.marker, f"{image.marker}\n({note})", 1)
    return dataclasses.replace(request, prompt=prompt, images=())


@contextlib.asynccontextmanager
async def closing_stream(stream: AsyncIterator[str]) -> AsyncIterator[AsyncIterator[str]]:
    """``stream`` for the block, closed when it ends however it ends (a model's stream is an async generator:
    left suspended at a chunk by a cancelled or failed reader, it would hold its HTTP response until the garbage
    collector closes it in a task of its own, or at shutdown, where nested ones fail with "aclose(): asynchronous
    generator is already running")."""
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


def interleave(prompt: str, images: tuple[ImagePart, ...]) -> list[str | ImagePart]:
    """The prompt cut after each image's marker, with the image in between: text, image, text, ...
    An image whose marker is not in the prompt is left out; empty text pieces are dropped."""
    placed: list[tuple[int, ImagePart]] = []
    for image in images:
        at = prompt.find(image.marker)
        if at >= 0:
            placed.append((at + len(image.marker), image))
    placed.sort(key=lambda pair: pair[0])
    parts: list[str | ImagePart] = []
    start = 0
    for end, image in placed:
        if prompt[start:end]:
            parts.append(prompt[start:end])
        parts.append(image)
        start = end
    if prompt[start:] or not parts:
        parts.append(prompt[start:])
    return parts


@dataclass(kw_only=True)
class ModelUsage:
    """Token counts of one call, when the provider reports them."""

    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Generated tokens."""
    cached_input_tokens: int = 0
    """Of ``input_tokens``, those the provider read from its prompt cache (a prefix it had seen: OpenAI's
    ``cached_tokens``, Anthropic's ``cache_read_input_tokens``), billed at a discount."""


@runtime_checkable
class Model(Protocol):
    """A text generator. ``stream`` yields chunks of the answer as they are produced; ``name``, ``model``,
    ``vision`` and ``last_usage`` are plain attributes in every provider.

    Implementations raise ``ModelError`` (or ``ModelAuthError``) for failures, never a library's own
    exception type.
    """

    @property
    def name(self) -> str:
        """For logs and errors (``openai:gpt-4o``)."""
        ...

    @property
    def model(self) -> str:
        """The provider's name of the model it asks for (``gpt-4o``): usage and prices are counted under it;
        empty for a model with no such name (usage is then counted under ``name``)."""
        ...

    @property
    def vision(self) -> bool:
        """True when the model accepts images: requests then carry the images their prompt refers to."""
        ...

    @property
    def last_usage(self) -> ModelUsage | None:
        """The usage of its last call, for a provider that does not ``report_usage`` (None: not known; the step
        loop then estimates it). Shared by every run of the process, so ``report_usage`` is preferred."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """Stream the answer to ``request``."""
        ...


@runtime_checkable
class CallsTools(Protocol):
    """A model that writes tool calls in its own chat format (the embedded Qwen2.5): the compact prompt then
    offers it the actions as ``ModelRequest.tools``; other models get the compact prompt without tools."""

    @property
    def calls_tools(self) -> bool:
        """True when this model's template writes tool calls (a GGUF file without that format: False)."""
        ...


@runtime_checkable
class PrefersCompact(Protocol):
    """A model small enough to be given the compact prompt by default (the embedded model): a plain-text answer,
    the last few messages, tools only in its own format (``AgentOptions.compact_prompt`` None follows it)."""

    prefers_compact: bool
    """True: ``create_agent`` gives it the compact prompt unless told otherwise."""


@runtime_checkable
class Preloads(Protocol):
    """A model whose client library is loaded on demand (the OpenAI-compatible one: the ``openai`` SDK, about half a
    second of imports), so that a bot is ready before it: ``preload()`` starts loading it in a thread, ``connect()``
    waits for that (starting it if nothing did). A deadline on an answer (``FallbackModel``'s first chunk) starts
    once the model is connected: loading our own code is not the model server being slow."""

    def preload(self) -> None:
        """Start loading the client in a thread (on the running event loop); nothing if it is loaded or loading."""
        ...

    async def connect(self) -> None:
        """Return once the client is loaded (raises what loading raised)."""
        ...


@runtime_checkable
class SelfChecking(Protocol):
    """A model that answers ``/readyz`` itself (the embedded model: its weights are loaded or loadable)."""

    def ready(self) -> Any:
        """``True``/``None`` when it can answer, ``False`` or a reason string when not; plain or async."""
        ...


@runtime_checkable
class HoldsWeights(Protocol):
    """A model run in this process from a weights file: ready once loaded, or while the file is there."""

    @property
    def loaded(self) -> bool:
        """True once the weights are in memory."""
        ...

    @property
    def model_path(self) -> Path:
        """The weights file."""
        ...


@runtime_checkable
class ServedOverHttp(Protocol):
    """A model behind an HTTP server: ready while ``GET <base_url>/models`` answers."""

    @property
    def base_url(self) -> str:
        """The server's API root (``https://api.openai.com/v1``)."""
        ...


call_usage: ContextVar[ModelUsage | None] = ContextVar("call_usage", default=None)
"""The usage of the model call streaming in this task, as its provider reported it (``report_usage``). A
provider's stream runs in the task that reads it, so concurrent runs never see each other's figures (a model's
``last_usage`` attribute is shared by every run of the process)."""


def report_usage(usage: ModelUsage) -> None:
    """Called by a provider as its stream ends: the reader of the stream (the step loop) counts ``usage``."""
    call_usage.set(usage)


call_reasoning: ContextVar[Callable[[str], None] | None] = ContextVar("call_reasoning", default=None)
"""Where the model call streaming in this task sends the reasoning its provider returns apart from the answer
(set by the reader of the stream, the step loop: it becomes ``reasoning`` run events); None: nobody wants it."""


def report_reasoning(text: str) -> None:
    """Called by a provider for a piece of the model's own reasoning (OpenAI-compatible ``reasoning_content``,
    Anthropic thinking): handed to the reader of the stream, never part of the answer's text."""
    heard = call_reasoning.get()
    if heard is not None and text:
        heard(text)


@dataclass(kw_only=True)
class ModelRoute:
    """Which models of a chain (``FallbackModel``) one call went through, filled in as it goes."""

    answered: str = ""
    """The name usage is counted under of the model that answered (its ``model``, else its ``name``); empty
    while none has sent its first chunk."""
    provider: str = ""
    """The provider part of its ``name`` (``openai`` of ``openai:gpt-4o``)."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    """``(name, error)`` of each model that failed this call (a timeout, a 429, a 5xx, a refused connection,
    a dropped stream), in the order they were asked; named as usage names them."""
    skipped: list[str] = field(default_factory=list)
    """The models passed over because their circuit breaker had them paused, named as usage names them."""


call_route: ContextVar[ModelRoute | None] = ContextVar("call_route", default=None)
"""The route of the model call streaming in this task, set by a chain of models (``FallbackModel``) as its stream
starts; the step loop resets it before each call and reads which model answered from it (usage, metrics, traces).
None: a single model answered."""
