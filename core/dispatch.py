"""Dispatchers: how ``agent.send`` reaches ``agent.run``.

The in-process dispatcher (the embedded default) calls ``agent.run`` directly: one run at a time per
context, inputs that arrive meanwhile join the running one, different contexts in parallel. The Redis
dispatcher (``core.fleet``) puts the input in the context's inbox instead, and workers run it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .definitions import Context
from .entries import InputRef, Log

if TYPE_CHECKING:
    from .bot import Bot
    from .chat_settings import ChatPolicy
    from .events import RunEvent
    from .models.base import Model
    from .reply_ledger import ReplyLedger

__all__ = ("Dispatcher", "InProcessDispatcher", "Runner")


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

    @property
    def chat_policy(self) -> ChatPolicy:
        """The operator's rules for chat settings: the pins and defaults of the busy policy and the quiet window."""
        ...

    def context_id(self, context: Context, args: Any) -> str:
        """``<type>:<key>`` of the instance ``args`` names."""
        ...

    def settings_parents(self, context: Context, args: Any) -> tuple[str, ...]:
        """The conversations whose chat settings this one starts from, nearest first (their pins hold in it)."""
        ...

    async def run(
        self,
        context: Context,
        args: Any,
        inputs: Sequence[InputRef] = (),
        *,
        listener: Callable[[RunEvent], Any] | None = None,
        batch: str | None = None,
        ledger: ReplyLedger | None = None,
        stopped: bool = False,
    ) -> list[Log]:
        """Run the instance with ``inputs``; if it is already running here, the inputs join that run (``batch``: the
        queued batch they are, ``core.reply_ledger.BATCH``; ``stopped``: a Stop was pressed before they began to
        run, so they are recorded and not answered)."""
        ...

    def stop_answer(self, context_id: str) -> bool:
        """Stop the answer being written in ``context_id`` in this process (a person pressed Stop)."""
        ...

    async def drop_messages(self, context: Context, args: Any, message_ids: Collection[str]) -> int:
        """Platform messages deleted by their authors leave the conversation's run, memory and history here."""
        ...

    def observe(self, kind: str, context_id: str, value: float = 1.0) -> None:
        """Report ``value`` of ``kind`` for ``context_id`` to the observers (a worker's leases and backlog)."""
        ...

    def unseen(self, context_id: str) -> bool:
        """An input for ``context_id`` would join its run here before anything of its answer is shown."""
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


@runtime_checkable
class Dispatcher(Protocol):
    """Takes inputs from ``agent.send`` and gets them run."""

    distributed: bool
    """True when a queue shared with other processes runs the contexts: no state is cached between runs,
    and the platform adapters hand inputs over rather than answer them in this process."""

    async def start(self, agent: Runner) -> None:
        """Prepare (connect, start background work)."""
        ...

    async def submit(
        self, context: Context, args: Any, input_ref: InputRef, *, dedupe_key: str | None = None
    ) -> list[Log]:
        """Hand over one input. In-process: returns the chain of the run that handled it. Queued: returns
        an empty list once the input is stored; raises ``BackpressureError`` when the inbox is full."""
        ...

    async def stop_answer(self, context_id: str, *, by: str | None = None) -> bool:
        """A person pressed Stop: stop the answer of ``context_id`` wherever the dispatcher runs it (in-process:
        nothing to add to ``Agent.stop_answer``). True when there was something to stop. ``by``: who pressed it,
        not the chat's admin: only an answer for them is stopped (``Host.request_stop``), else ``NotAllowedError``."""
        ...

    async def set_controls(self, context_id: str, *, busy: str | None, quiet_ms: int | None) -> None:
        """``context_id`` chose its busy policy and quiet window (``/busy``, ``/quiet``; None: the operator's),
        stored with its settings already: a queue keeps them with its inbox too, where its ingest and take read them
        (in-process: nothing, the run reads the settings)."""
        ...

    async def stop(self) -> None:
        """Stop taking inputs and release resources."""
        ...


class InProcessDispatcher:
    """Runs inputs in this process (one run per context; different contexts in parallel)."""

    distributed = False

    def __init__(self, *, dedupe_size: int = 10_000) -> None:
        self._agent: Runner | None = None
        self._seen: dict[str, None] = {}
        self._dedupe_size = dedupe_size

    async def start(self, agent: Runner) -> None:
        """Remember the agent."""
        self._agent = agent

    async def submit(
        self, context: Context, args: Any, input_ref: InputRef, *, dedupe_key: str | None = None
    ) -> list[Log]:
        """Run the input now (or join the context's running run); a repeated ``dedupe_key`` is dropped."""
        if self._agent is None:
            raise RuntimeError("InProcessDispatcher.submit() before start(): call await agent.start() first")
        if dedupe_key is not None:
            if dedupe_key in self._seen:
                return []
            self._seen[dedupe_key] = None
            if len(self._seen) > self._dedupe_size:
                self._seen.pop(next(iter(self._seen)))
        return await self._agent.run(context, args, [input_ref])

    async def stop_answer(self, context_id: str, *, by: str | None = None) -> bool:
        """Nothing runs elsewhere: ``Agent.stop_answer`` stops the runs of this process."""
        return False

    async def set_controls(self, context_id: str, *, busy: str | None, quiet_ms: int | None) -> None:
        """Nothing to keep: a run reads its conversation's settings when it starts."""
        return None

    async def stop(self) -> None:
        """Nothing to release."""
