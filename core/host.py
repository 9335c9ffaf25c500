"""What the agent offers the code it hosts, as protocols: core depends on these, never on ``core.agent``.

- ``Host`` is the agent as a handler, a context hook, an extension or a service sees it (the third argument of
  every handler, what ``install``/``start``/``subscribe`` receive): the registrations an extension makes (each
  ``add_*`` returns the function that takes it back), sending to a conversation, its settings and stores.
- ``Runner`` is the agent as a dispatcher or a queue worker sees it: something that runs contexts.

``core.Agent`` satisfies both; a test may hand either one a small stand-in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from pydantic import BaseModel

if TYPE_CHECKING:
    from .bot import Bot
    from .chat_settings import ChatPolicy, ChatSettings, ChatSettingsStore
    from .definitions import Action, Context, ContextState, Service
    from .dispatch import Dispatcher
    from .entries import InputRef, Log
    from .events import RunEvent
    from .media.reader import Fetcher, MediaReader
    from .memory import HistoryStore, MemoryStore
    from .models.base import Model
    from .plugin import Plugin
    from .trust import Approvals, Trust
    from .usage import UsageStore

__all__ = ("Check", "Host", "Observer", "Runner")

Observer = Callable[[str, str, float], Any]
"""``observer(kind, context_id, value)``: hooks for metrics. The agent reports ``model_seconds``, ``output``,
``run_seconds``, ``reply_seconds``, ``input_tokens``, ``output_tokens``, ``attachment:<kind>:<outcome>`` and
``attachment_bytes``; extensions and queues report more through ``Host.observe`` (``bots.metrics`` lists the
kinds it counts)."""

Args = TypeVar("Args")
"""The arguments of a context's instances (``Context[Args]``), as ``send`` takes them."""
ModelArgs = TypeVar("ModelArgs", bound=BaseModel)
"""Arguments that are a pydantic model: ``send`` takes the model or a mapping it validates into one."""

Check = Callable[[], Any]
"""A readiness check: returns (or awaits to) ``True``/``None`` when ready, ``False`` or a reason string when
not, or raises; a ``Degraded`` reason is reported while the process stays ready."""


class Host(Protocol):
    """The agent as handlers, context hooks, extensions and services see it."""

    # -- what an extension registers (each returns its undo) ---------------------------------------

    def add_readiness(self, name: str, check: Check) -> Callable[[], None]:
        """Register the readiness check ``name`` (``/readyz``); a second check of the same name replaces it."""
        ...

    def add_observer(self, observer: Observer) -> Callable[[], None]:
        """Have ``observer(kind, context_id, value)`` see what the agent measures (metrics)."""
        ...

    def add_event_listener(self, listener: Callable[[RunEvent], Any]) -> Callable[[], None]:
        """Have ``listener`` see the events of every run in this process (live replies, metrics)."""
        ...

    def add_action_source(self, source: Callable[[ContextState], Iterable[Action]]) -> Callable[[], None]:
        """Offer the actions ``source`` gives at each step (an MCP server's tools)."""
        ...

    def add_media_fetcher(self, source: str, fetch: Fetcher) -> Callable[[], None]:
        """Fetch the attachments whose ``source`` is ``source`` (a platform) with ``fetch``."""
        ...

    def add_service(self, svc: Service, *, first: bool = False) -> Callable[[], None]:
        """Start ``svc`` with the agent (before the others when ``first``) and stop it in reverse order."""
        ...

    def set_approvals(self, approvals: Approvals) -> Callable[[], None]:
        """Hand the calls whose rule says ``approve`` to ``approvals`` (until then they are refused)."""
        ...

    @property
    def trust(self) -> Trust | None:
        """Who may call which action (``core.trust``); None: every action is offered to everyone."""
        ...

    def pin_settings(self, context_id: str, pins: Mapping[str, str]) -> None:
        """Hold chat settings of ``context_id`` at the operator's values (``ChatPolicy.pinned``)."""
        ...

    @property
    def readiness_checks(self) -> Mapping[str, Check]:
        """The readiness checks registered so far, by name (read only)."""
        ...

    # -- what it may read ----------------------------------------------------------------------------

    @property
    def plugins(self) -> tuple[Plugin, ...]:
        """The features attached to the engine's hooks (``core.plugin``)."""
        ...

    @property
    def bot(self) -> Bot:
        """The bot this agent runs (``core.Bot``)."""
        ...

    @property
    def model(self) -> Model:
        """The model every run uses."""
        ...

    @property
    def memory(self) -> MemoryStore:
        """Where context memory and working memory are kept."""
        ...

    @property
    def history(self) -> HistoryStore | None:
        """Where every input and output is kept and searched (None: not kept)."""
        ...

    @property
    def media(self) -> MediaReader:
        """Reads attachments when a run starts (limits, whether heard audio is echoed)."""
        ...

    @property
    def chat_policy(self) -> ChatPolicy:
        """The operator's rules for settings changed from the chat."""
        ...

    @property
    def chat_settings(self) -> ChatSettingsStore:
        """Each conversation's own settings."""
        ...

    @property
    def usage(self) -> UsageStore:
        """Tokens and estimated cost per day, per user, conversation and model."""
        ...

    @property
    def contexts(self) -> Mapping[str, Context]:
        """Contexts by type."""
        ...

    @property
    def stop_timeout(self) -> float:
        """Seconds ``stop()`` waits for running runs before cancelling them."""
        ...

    @property
    def distributed(self) -> bool:
        """True when a queue shared with other processes runs the contexts."""
        ...

    @property
    def sees_images(self) -> bool:
        """True when the model is given images."""
        ...

    @property
    def running(self) -> bool:
        """True between ``start()`` and the beginning of ``stop()``."""
        ...

    @property
    def failure(self) -> BaseException | None:
        """The error a service reported with ``fail``, else None."""
        ...

    def context_id(self, context: Context, args: Any) -> str:
        """``<type>:<key>`` of the instance ``args`` names."""
        ...

    def settings_parents(self, context: Context, args: Any) -> tuple[str, ...]:
        """The conversations whose chat settings this one starts from, nearest first."""
        ...

    async def chat_of(self, context_id: str, parents: Sequence[str] = ()) -> ChatSettings:
        """The settings a run of ``context_id`` uses."""
        ...

    def state_of(self, context_id: str) -> ContextState | None:
        """The state of the run of ``context_id`` going on in this process, None between runs."""
        ...

    def is_admin(self, user: str) -> bool:
        """True for a platform-qualified user id listed as an admin (``BOT_ADMIN_USERS``)."""
        ...

    # -- what it may do ------------------------------------------------------------------------------

    @overload
    async def send(
        self,
        context: Context[ModelArgs],
        args: ModelArgs | Mapping[str, Any],
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> list[Log]: ...
    @overload
    async def send(
        self,
        context: Context[Args],
        args: Args,
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> list[Log]: ...
    async def send(
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> list[Log]:
        """Deliver an input to the instance ``args`` names: a ``Context[Args]`` takes ``Args`` (mypy checks it), a
        context whose arguments are a pydantic model also a mapping that validates into one."""
        ...

    def stream(
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        reasoning: bool = True,
    ) -> AsyncIterator[RunEvent]:
        """Send ``input`` and yield the run's events as they happen."""
        ...

    async def say(self, state: ContextState, text: str) -> None:
        """Post ``text`` through the conversation's own reply output, from a handler during its run."""
        ...

    async def reset(self, context: Context, args: Any) -> None:
        """Forget the instance's memory (``/reset``)."""
        ...

    async def forget(self, context: Context, args: Any) -> None:
        """Erase everything about the instance, its history too (``/forget``)."""
        ...

    def observe(self, kind: str, context_id: str, value: float = 1.0) -> None:
        """Report ``value`` of ``kind`` for ``context_id`` to the observers."""
        ...

    def fail(self, error: BaseException) -> None:
        """Report an error a service cannot recover from; whoever runs the agent stops it."""
        ...

    async def failed(self) -> BaseException:
        """Wait until a service reports a fatal error; return it."""
        ...


class Runner(Protocol):
    """The agent as a dispatcher or a queue worker sees it: something that runs contexts."""

    model: Model
    """The model every run uses (a queue worker wraps it to replay stored answers)."""

    @property
    def bot(self) -> Bot:
        """The bot it runs: a worker runs only the batches its gateway stored for the same bot."""
        ...

    @property
    def contexts(self) -> Mapping[str, Context]:
        """Contexts by type."""
        ...

    @property
    def dispatcher(self) -> Dispatcher:
        """How ``send`` reaches ``run``."""
        ...

    def context_id(self, context: Context, args: Any) -> str:
        """``<type>:<key>`` of the instance ``args`` names."""
        ...

    async def run(
        self,
        context: Context,
        args: Any,
        inputs: Sequence[InputRef] = (),
        *,
        listener: Callable[[RunEvent], Any] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> list[Log]:
        """Run the instance with ``inputs``; if it is already running here, the inputs join that run."""
        ...

    def cancel_run(self, context_id: str) -> bool:
        """Cancel the run of ``context_id`` going on in this process, without saving its memory."""
        ...

    async def start(self) -> None:
        """Install definitions, start services and the dispatcher, subscribe inputs."""
        ...

    async def stop(self) -> None:
        """Unsubscribe inputs, let running runs finish, then stop services."""
        ...

    async def __aenter__(self) -> object:
        """``start()``."""
        ...

    async def __aexit__(self, *exc: object) -> None:
        """``stop()``."""
        ...
