"""The agent: ``send``/``run``/``stream`` and its lifecycle, over the parts it is built from: its definitions
(``core.registry``), its instances' state (``core.state_store``), the runs going on (``core.run_table``) and what
extensions register (``core.extension_points``)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from . import tracing
from .agent_options import AgentOptions
from .bot import Bot
from .busy import BusyPolicy
from .chat_settings import ChatPolicy, ChatSettings, ChatSettingsStore
from .definition_types import ArgsNotOfTheContextsSchema
from .definitions import (
    Action,
    Context,
    ContextState,
    Extension,
    Input,
    InputContext,
    Output,
    Service,
    maybe_await,
)
from .deleted import forget_ref, matching
from .dispatch import Dispatcher, InProcessDispatcher
from .engine import Run
from .entries import InputRef, Log
from .errors import DefinitionError, NotAllowedError, RunError
from .event_stream import Switched, events_of
from .events import RunEvent
from .extension_points import ExtensionPoints
from .limits import LIMITER
from .memory import InMemoryStore, MemoryStore
from .models.base import CallsTools, Model, PrefersCompact
from .plugin import AgentHooks, Plugin, ordered
from .prompt import PromptTemplate
from .registry import Registry
from .reply_ledger import BATCH, ReplyLedger
from .run_deps import RunDeps
from .run_table import Pending, RunTable
from .run_traces import RunTrace, remember_run
from .safety import check_without, with_safe_defaults
from .state_store import StateStore
from .task_runner import TaskRunner
from .trace import correlation_id
from .trust.guard import TRUST
from .usage import user_of

__all__ = ("Agent", "create_agent")

log = logging.getLogger("core.agent")

Args = TypeVar("Args")
"""The arguments of a context's instances (``Context[Args]``)."""
ModelArgs = TypeVar("ModelArgs", bound=BaseModel)
"""Arguments that are a pydantic model: a mapping that validates into one is taken too."""


class Agent(ExtensionPoints):
    """Holds the definitions and runs contexts. Build it with ``create_agent``.

    Handlers, hooks and extensions see it as a ``core.host.Host``, dispatchers and queue workers as a
    ``core.host.Runner``, and each run of the step loop as its ``RunDeps``."""

    def __init__(
        self,
        *,
        model: Model,
        bot: Bot | None = None,
        contexts: Sequence[Context] = (),
        actions: Sequence[Action] = (),
        outputs: Sequence[Output] = (),
        inputs: Sequence[Input] = (),
        extensions: Sequence[Extension] = (),
        services: Sequence[Service] = (),
        plugins: Sequence[Plugin] = (),
        without: Sequence[str] = (),
        memory: MemoryStore | None = None,
        dispatcher: Dispatcher | None = None,
        options: AgentOptions | None = None,
    ) -> None:
        if not isinstance(model, Model):
            raise DefinitionError(
                f"create_agent(model=...): {type(model).__name__} is not a model; a model has the attributes name, "
                "model, vision and last_usage and a stream(request) method (core.Model; ScriptedModel shows them)"
            )
        opts = options if options is not None else AgentOptions()
        self.model = model
        """The model every run uses."""
        self.bot = bot if bot is not None else Bot(name="")
        """The bot this agent runs (``core.Bot``): its definitions are registered beside those given here (without
        one, an anonymous bot: no name, so a fleet does not check that its gateway and workers run the same)."""
        self.plugins: tuple[Plugin, ...] = tuple(
            ordered(
                with_safe_defaults(
                    (*self.bot.plugins, *plugins),
                    without=(*self.bot.without, *check_without(without, where="create_agent")),
                )
            )
        )
        """The features attached to the engine's hooks (``core.plugin``): the safety plugins the bot does not go
        without first (``core.safety``: the loop guard), then the bot's, then ``plugins``, each after those it
        needs (``Plugin.needs``, ``Plugin.after``, ``core.plugin.ordered``)."""
        self.memory: MemoryStore = memory if memory is not None else InMemoryStore()
        """Where context memory and working memory are kept."""
        self.dispatcher = dispatcher if dispatcher is not None else InProcessDispatcher()
        """How ``send`` reaches ``run``."""
        self.chat_settings = ChatSettingsStore(  # (kept in memory where the working memories are: one process)
            self.memory, controls=self.dispatcher, cache=not self.dispatcher.distributed and opts.state_cache > 0
        )
        """Each conversation's settings (``/model``, ``/persona``, ``/language``, ``/reply``, ``/busy``...), kept in
        the memory store (the dispatcher keeps ``/busy`` and ``/quiet`` where a queue's ingest reads them)."""
        self.hooks = AgentHooks.of(self.plugins)
        """The plugins' hooks around runs (``core.plugin.Plugin``): loaded, saved, reset, stop."""
        instructions = opts.instructions
        if self.bot.instructions:
            instructions = f"{instructions}\n\n{self.bot.instructions}" if instructions else self.bot.instructions
        self.prompt = PromptTemplate(
            template=opts.template,
            intro=opts.intro,
            instructions=instructions,
            response=opts.response,
            footer=opts.footer,
        )
        """The prompt's sections and how they are arranged (``core.prompt.PromptTemplate``)."""
        self.persona = opts.persona or self.bot.persona
        """Who the bot is, added to the system prompt."""
        self.compact_prompt = (
            isinstance(model, PrefersCompact) and model.prefers_compact
            if opts.compact_prompt is None
            else opts.compact_prompt
        )
        """Use the short, tool-less prompt made for small local models (by default when the model prefers it)."""
        self.chat_policy = dataclasses.replace(  # (what /busy and /quiet show is what the agent does)
            opts.chat_policy if opts.chat_policy is not None else ChatPolicy(),
            default_busy=BusyPolicy(opts.busy).value,
            default_quiet_ms=opts.quiet_ms,
            quiet_ms_by_context=dict(opts.quiet_ms_by_context),
        )
        """The operator's rules for settings changed from the chat (allowed models, pins, admins)."""
        self.max_tokens = opts.max_tokens
        """Upper bound on tokens per model call."""
        self.model_idle_timeout = opts.model_idle_timeout
        """Seconds the model may stay silent before the call fails."""
        self.output_timeout = opts.output_timeout
        """Seconds an output handler may take."""
        self.max_batch = opts.max_batch
        """Inputs one run answers at most (0: no cap)."""
        self.busy = BusyPolicy(opts.busy)
        """What a message sent while its conversation's run goes on does (``core.busy``)."""
        self.quiet_ms = opts.quiet_ms
        """In one process, a run starts once its conversation was quiet this long (``core.busy``; 0: at once)."""
        self.stop_timeout = opts.stop_timeout
        """Seconds ``stop()`` waits for running runs, then for fire-and-forget calls, before cancelling them."""
        self.states = StateStore(self.memory, cache=0 if self.dispatcher.distributed else opts.state_cache)
        """Loads and saves context instances' state; it keeps ``state_cache`` working memories loaded between runs
        (none when other processes share the memory store, as Redis workers do)."""
        self.tasks = TaskRunner(dict(opts.queues))
        """Where action handlers run."""
        self.observers = []
        """Metric hooks."""
        self.event_listeners = []
        """Listeners that see the events of every run."""
        self.slots = {}
        """What extensions gave the agent for their own later use (``provide``)."""
        self.readiness = {}
        """Readiness checks by name (``/readyz``), registered by extensions and services: each returns (or
        awaits to) ``True``/``None`` when ready, ``False`` or a reason string when not, or raises; a
        ``Degraded`` reason is reported while the process stays ready."""
        self.failure: BaseException | None = None
        """The error a service could not recover from, reported with ``fail`` (the first one), else None."""
        self._failed = asyncio.Event()
        brought = [ext for ext in (p.extension() for p in self.plugins) if ext is not None]
        self.extensions = (*extensions, *self.bot.extensions, *brought)
        self.registry = Registry()
        """The definitions (``core.registry``); ``contexts``, ``actions``, ``action_sources``, ``outputs`` and
        ``inputs`` are its containers."""
        self.contexts = self.registry.contexts
        self.actions = self.registry.actions
        self.action_sources = self.registry.action_sources
        self.outputs = self.registry.outputs
        self.inputs = self.registry.inputs
        self.services = [*services, *self.bot.services]
        self._runs = RunTable()
        self._unsubscribers: list[Callable[[], Any]] = []
        self._started = False
        self._stopping = False
        self._answering = False
        self._deps: RunDeps | None = None  # what runs read, built at the first run and again when the model changes
        for ext in self.extensions:
            self.registry.register(ext.contexts, ext.actions, ext.outputs, ext.inputs, owner=f"extension {ext.name!r}")
            self.services.extend(ext.services)
        bot_ = self.bot
        own = (bot_.context,) if bot_.context is not None else ()
        self.registry.register(
            (*own, *bot_.contexts), bot_.typed_actions, bot_.typed_outputs, bot_.inputs, owner=f"bot {bot_.name!r}"
        )
        self.registry.register(contexts, actions, outputs, inputs, owner="create_agent")
        if bot_.context is not None:
            self.registry.lay(bot_.context)
        for plugin in self.plugins:  # (each provides what it has: agent.provided(USAGE), LIMITER, TRUST...)
            plugin.attach(self)

    # -- definitions and instances --------------------------------------------------------------------

    def available(self, state: ContextState) -> tuple[list[Action], list[Output]]:
        """The actions and outputs offered to the model in ``state``'s context."""
        return self.registry.available(state)

    def context_id(self, context: Context, args: Any) -> str:
        """``<type>:<key>`` of the instance ``args`` names."""
        return f"{context.type}:{context.key(args)}"

    def state_of(self, context_id: str) -> ContextState | None:
        """The state of the run of ``context_id`` going on in this process, None between runs. Event
        listeners use it to find where an output they see streaming will go (``RunEvent.context_id``)."""
        return self._runs.state_of(context_id)

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Install definitions, start services and the dispatcher, subscribe inputs."""
        if self._started:
            return
        self._started = True
        for ext in self.extensions:
            if ext.install is not None:
                await maybe_await(ext.install(self))
        for definition in self.registry.installable():
            if definition.install is not None:
                await maybe_await(definition.install(self))
        for svc in self.services:
            if svc.start is not None:
                await maybe_await(svc.start(self))
        await self.dispatcher.start(self)
        for inp in self.inputs.values():
            if inp.subscribe is not None:
                unsubscribe = await maybe_await(inp.subscribe(self.send, self))
                if callable(unsubscribe):
                    self._unsubscribers.append(unsubscribe)
        self._answering = True

    async def stop(self) -> None:
        """Unsubscribe inputs, let running runs finish (up to ``stop_timeout``), then stop services."""
        if self._stopping:
            return
        self._stopping = True
        for unsubscribe in reversed(self._unsubscribers):
            try:
                await maybe_await(unsubscribe())
            except Exception:
                log.exception("an input's unsubscribe raised")
        self._unsubscribers.clear()
        await self.dispatcher.stop()
        await self._runs.drain(self.stop_timeout)
        await self.tasks.close(self.stop_timeout)  # fire-and-forget calls: finished, or cancelled
        for svc in reversed(self.services):
            if svc.stop is not None:
                try:
                    await maybe_await(svc.stop(self))
                except Exception:
                    log.exception("service %s failed to stop", svc.name)
        for stop in self.hooks.stop:
            try:
                await stop()
            except Exception:
                log.exception("a plugin failed to stop")
        await self.memory.close()

    @property
    def running(self) -> bool:
        """True between ``start()`` and the beginning of ``stop()``."""
        return self._started and not self._stopping

    @property
    def started(self) -> bool:
        """True once ``start()`` has finished (every service started, the model loaded, every input subscribed)
        until ``stop()`` begins: the agent answers (``/readyz``)."""
        return self._answering and not self._stopping

    def fail(self, error: BaseException) -> None:
        """Report an error a service cannot recover from while the agent runs (a platform took back the
        bot's token or intents): ``failed()`` returns it, and whoever runs the agent (``bots run``) stops
        it and exits with it. The agent itself keeps running until stopped. The first error is kept."""
        if self.failure is not None:
            log.warning("a service failed after an earlier fatal error: %s", error)
            return
        self.failure = error
        self._failed.set()

    async def failed(self) -> BaseException:
        """Wait until a service reports a fatal error with ``fail``; return it."""
        await self._failed.wait()
        assert self.failure is not None
        return self.failure

    async def __aenter__(self) -> Agent:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- memory ----------------------------------------------------------------------------------------

    async def load_state(self, context: Context, args: Any) -> ContextState:
        """Load (or create) the state of the instance ``args`` names."""
        context = self.registry.resolve(context)
        cid = self.context_id(context, args)
        return await self._load_state(context, args, cid, await self.chat_of(cid, self.settings_parents(context, args)))

    async def _load_state(self, context: Context, args: Any, cid: str, chat: ChatSettings) -> ContextState:
        with tracing.span("read memory"):
            state = await self.states.load(context, args, cid=cid, chat=chat, host=self)
        for loaded in self.hooks.loaded:
            await loaded(state)
        return state

    async def _load_used(self, state: ContextState) -> list[ContextState]:
        """The instances of the other contexts a run of ``state`` uses (``Context.uses``), loaded, each once."""
        uses = state.context.uses
        if uses is None:
            return []
        try:
            wanted = list(uses(state))
        except Exception as exc:  # the author's code: say whose it is
            raise RunError(
                f"the uses function of context {state.context.type!r} raised {type(exc).__name__}: {exc}; fix it"
            ) from exc
        used: list[ContextState] = []
        for use in wanted:
            context = self.registry.resolve(use.context)
            if self.registry.contexts.get(context.type) is not context:
                raise DefinitionError(
                    f"context {state.context.type!r} uses context {context.type!r}, which the agent does not have: "
                    "register it (create_agent(contexts=...) or Bot(contexts=...))"
                )
            args = context.schema.validate(use.args)
            cid = self.context_id(context, args)
            if cid != state.id and all(u.id != cid for u in used):
                used.append(await self.load_state(context, args))
        return used

    async def save_state(self, state: ContextState) -> None:
        """Save the instance's memory and its (trimmed) working memory."""
        await self.states.save(state, host=self)

    async def reset(self, context: Context, args: Any) -> None:
        """Forget everything about the instance ``args`` names (``/reset``): its memory and state; its history
        stays searchable (the ``LongMemory`` plugin drops its summary)."""
        await self._reset(context, args, erase=False)

    async def forget(self, context: Context, args: Any) -> None:
        """Erase everything about the instance ``args`` names (``/forget``): as ``reset`` does, and its full
        history and summary."""
        await self._reset(context, args, erase=True)

    async def _reset(self, context: Context, args: Any, *, erase: bool) -> None:
        context = self.registry.resolve(context)
        args = context.schema.validate(args)
        cid = self.context_id(context, args)
        current = self._runs.get(cid)
        if isinstance(current, Run):
            current.forget = True  # a run in progress must not save back what is being forgotten
            if current.saving:  # (too late for that: what it saves is deleted once it is saved)
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.shield(current.finished)
        await self.states.delete(cid)
        for reset in self.hooks.reset:
            await reset(cid, erase=erase)

    @property
    def sees_images(self) -> bool:
        """True when the model is given images: it declares ``vision`` and the full prompt is used (the
        compact prompt of small local models is text only)."""
        return self.model.vision and not self.compact_prompt

    def run_deps(self) -> RunDeps:
        """What a run of the step loop reads: built once and shared by the runs until the model, its ``vision`` or
        the prompt's kind changes (runs only read it; the other settings are read when the first run starts)."""
        deps = self._deps
        if (
            deps is None
            or deps.model is not self.model
            or deps.sees_images != self.sees_images
            or deps.compact_prompt != self.compact_prompt
        ):
            deps = self._deps = self._build_deps()
        return deps

    def _build_deps(self) -> RunDeps:
        return RunDeps(
            host=self,
            model=self.model,
            max_tokens=self.max_tokens,
            model_idle_timeout=self.model_idle_timeout,
            output_timeout=self.output_timeout,
            prompt=self.prompt,
            persona=self.persona,
            compact_prompt=self.compact_prompt,
            instructions=self.bot.instructions,
            calls_tools=isinstance(self.model, CallsTools) and self.model.calls_tools,
            sees_images=self.sees_images,
            max_batch=self.max_batch,
            tasks=self.tasks,
            available=self.available,
            observe=self.observe,
            observe_model=self.observe_model,
            observe_output=self.observe_output,
            plugins=self.plugins,
        )

    # -- sending and running ---------------------------------------------------------------------------

    def make_input(
        self,
        input: InputRef | Mapping[str, Any],
    ) -> InputRef:
        """An ``InputRef`` from an ``InputRef`` or a mapping with ``type``, ``data`` and optional ``params``;
        data is validated against the input's schema when the type is registered."""
        ref = input if isinstance(input, InputRef) else InputRef.model_validate(dict(input))
        if ref.correlation_id is None:
            ref.correlation_id = correlation_id.get() or ref.id
        definition = self.inputs.get(ref.type)
        if definition is not None:
            ref.data = definition.schema.dump(definition.schema.validate(ref.data))
        return ref

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
    @overload
    def send(  # (args not of the context's schema: mypy names the type it gets instead of "Cannot infer...")
        self,
        context: Context[Any],
        args: object,
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> ArgsNotOfTheContextsSchema: ...
    async def send(  # type: ignore[misc]
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> list[Log]:
        """Deliver an input to the instance ``args`` names. With the in-process dispatcher this returns
        the chain of the run that handled it; with a queue it returns once the input is stored."""
        context = self.registry.resolve(context)
        args = context.schema.validate(args)
        ref = self.make_input(input)
        token = correlation_id.set(ref.correlation_id)
        try:
            return await self.dispatcher.submit(context, args, ref, dedupe_key=dedupe_key)
        finally:
            correlation_id.reset(token)

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
        """Run the instance with ``inputs``; if it is already running here, the inputs join that run.

        ``batch``: the queued batch a new run answers, the same in every attempt at it (``core.reply_ledger.BATCH``
        in its state's values); inputs that join a running run leave its batch as it is. ``stopped``:
        a Stop was pressed before these inputs began to run (a queued batch, ``core.fleet.stops``): they are
        recorded, the stop with them, and not answered."""
        context = self.registry.resolve(context)
        cid = self.context_id(context, args)
        while True:
            current = self._runs.get(cid)
            if current is None:
                break
            if isinstance(current, Pending):
                target = current.room(self.max_batch)  # (a full one: they go to the run after it)
                target.inputs.extend(inputs)
                if listener is not None:
                    target.listeners.append(listener)
                return await asyncio.shield(target.finished)
            busy = self.busy_policy(current.state.chat)  # (as the run in progress read the chat's settings)
            if current.unseen and not stopped:  # (core.busy: nothing of its answer shown yet, whatever the policy:
                busy = BusyPolicy.STEER  # they join it, and its model call starts again with them, Run.restart)
            if current.accepting and busy is not BusyPolicy.STEER and not stopped:
                if busy is BusyPolicy.INTERRUPT:
                    current.stop()
                after = self._runs.after(cid)  # (collect, queue, interrupt: the run after this one answers them)
                if after is not None:
                    target = after.room(1 if busy is BusyPolicy.QUEUE else self.max_batch)
                    target.inputs.extend(inputs)
                    if listener is not None:
                        target.listeners.append(listener)
                    return await asyncio.shield(target.finished)
            elif current.accepting:
                if listener is not None:
                    current.emitter.listeners.append(listener)
                inputs = await current.join(inputs, self._prepare_input)
                if not inputs:
                    if not stopped:
                        current.restart()  # (when nothing is shown yet; else its next step reads them)
                    return await asyncio.shield(current.finished)
                if listener is not None:  # it finished while they were prepared: they start the next run
                    current.emitter.listeners.remove(listener)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(current.finished)  # closing: wait until its memory is saved
        pending = Pending(list(inputs), listener)
        pending.batch = batch
        pending.ledger = ledger
        pending.stopped = stopped
        self._runs.put(cid, pending)
        run_context = contextvars.copy_context()
        if run_context.get(correlation_id) is None:  # a queue worker: take the id the input carried
            carried = next((ref.correlation_id for ref in inputs if ref.correlation_id), None)
            run_context.run(correlation_id.set, carried)
        self._start(context, args, cid, pending, run_context)
        return await asyncio.shield(pending.finished)

    async def say(self, state: ContextState, text: str) -> None:
        """Post ``text`` as written through the conversation's own reply output (the platform's: a Telegram message,
        a Discord message...), from a handler during the run of ``state``: how a bot's own output or action shows
        something in whatever platform the conversation is on. Raises ``RunError`` outside of that run, and the
        output's errors."""
        run = self._runs.get(state.id)
        if not isinstance(run, Run) or run.state is not state:
            raise RunError(f"agent.say(state, ...) is for a handler during the run of {state.id}")
        await run.say(text)

    def stop_answer(self, context_id: str) -> bool:
        """Stop the answer being written in ``context_id`` in this process (a person pressed Stop): its model call
        is cancelled now, what it had written is kept with a mark, no further action runs, and the run ends with
        its memory saved (``Run.stop``); a run still being prepared (its state loading, its media fetched) starts
        stopped. False when no answer is being written here."""
        current = self._runs.get(context_id)
        if isinstance(current, Pending):
            current.stopped = True
            return True
        return isinstance(current, Run) and current.stop()

    async def request_stop(self, context_id: str, *, by: str | None = None) -> bool:
        """A person pressed Stop in ``context_id``: stop its answer wherever it is written, in this process
        (``stop_answer``) and, with a queue, on the worker that holds the conversation (the dispatcher tells every
        worker and records the stop with the conversation, ``core.fleet.stops``); the conversation's approvals still
        pending are withdrawn (``core.trust.Approvals.withdraw``). False when there was nothing to stop. Raises
        ``DispatchError`` when the queue cannot be reached.

        ``by``: who pressed it (``telegram:123``), when they are neither the chat's admin nor the operator: they may
        stop an answer being written only when one of its inputs is theirs, and one not begun yet only when all of
        its inputs are (``answer_for``); otherwise ``NotAllowedError`` is raised and nothing is stopped. None: the
        chat's admin, the operator or the only person in the conversation, who may stop any answer."""
        if by is not None and not self.answer_for(context_id, by):
            raise NotAllowedError(
                f"the answer being written in {context_id} is not for {by}: only its askers and "
                "the chat's admins may stop it"
            )
        if by is not None and self.dispatcher.distributed:  # (the queue decides first, where the batch is)
            here = await self.dispatcher.stop_answer(context_id, by=by)
            here = self.stop_answer(context_id) or here
        else:
            here = self.stop_answer(context_id)
            if self.dispatcher.distributed:
                here = await self.dispatcher.stop_answer(context_id) or here
        trust = self.provided(TRUST)  # (the TrustGuard plugin's settings)
        approvals = trust.approvals if trust is not None else None
        if approvals is not None:
            here = await approvals.withdraw(context_id) > 0 or here
        return here

    def answer_for(self, context_id: str, user: str) -> bool:
        """Whether ``user`` (a platform-qualified id) may stop what runs of ``context_id`` in this process: the
        answer being written when one of its inputs is theirs, the one being prepared when all of its inputs are
        (a Stop then covers them all, and no one else's question is silenced); True when nothing runs here (with a
        queue, the dispatcher decides for the batch it holds)."""
        current = self._runs.get(context_id)
        if isinstance(current, Run):
            return any(isinstance(e, InputRef) and user_of(e) == user for e in current.chain)
        if isinstance(current, Pending):
            return bool(current.inputs) and all(user_of(ref) == user for ref in current.inputs)
        return True

    async def forget_messages(self, context: Context, args: Any, message_ids: Collection[str]) -> int:
        """Platform messages of the instance ``args`` names were deleted by their authors: they leave the run in
        progress, the inputs waiting, the working memory and the history (``core.deleted``); how many entries went
        (0 with a queue: the worker that runs the conversation removes them, in order with its messages)."""
        context = self.registry.resolve(context)
        args = context.schema.validate(args)
        ids = {str(m) for m in message_ids}
        if ids and self.dispatcher.distributed:
            await self.dispatcher.submit(context, args, forget_ref(ids))
            return 0
        return await self.drop_messages(context, args, ids) if ids else 0

    async def drop_messages(self, context: Context, args: Any, message_ids: Collection[str]) -> int:
        """``forget_messages`` where the conversation runs (a queue worker, for a ``FORGET_INPUT``)."""
        cid = self.context_id(context, args)
        for pending in self._runs.waiting(cid):
            pending.inputs[:] = [ref for ref in pending.inputs if not matching([ref], message_ids)]
        current = self._runs.get(cid)
        if isinstance(current, Run):  # (what it drops is neither saved with it nor added to the history)
            logs = {id(e): e for e in (*current.state.working_memory.logs, *current.chain)}
            gone = matching(logs.values(), message_ids)
            for entry in gone:
                current.drop(entry)
        else:
            state = await self.load_state(context, args)
            gone = matching(state.working_memory.logs, message_ids)
            if gone:
                state.working_memory.logs[:] = [e for e in state.working_memory.logs if all(e is not g for g in gone)]
                await self.save_state(state)
        for forgotten in self.hooks.forgotten:  # (the long memory: its history, and a summary that held them)
            await forgotten(cid, gone, message_ids)
        if gone:
            log.info("%s: %d deleted message(s) left the working memory and the history", cid, len(gone))
        return len(gone)

    def unseen(self, context_id: str) -> bool:
        """Whether an input for ``context_id`` would be answered together with those of its run here, nothing of
        that answer being shown yet (its run being set up, or ``Run.unseen``: its model call starts again with it,
        ``core.busy``). False when it runs nothing here."""
        current = self._runs.get(context_id)
        return isinstance(current, Pending) or (isinstance(current, Run) and current.unseen)

    def cancel_run(self, context_id: str) -> bool:
        """Cancel the run of ``context_id`` going on in this process, without saving its memory (a queue
        worker lost the context's lease). True if there was one to cancel."""
        return self._runs.cancel(context_id)

    async def _prepare_input(self, state: ContextState, ref: InputRef) -> None:
        for prepare in self.hooks.prepare:  # (media: the attachments, read in the process that runs the context)
            await prepare(state, ref)
        definition = self.inputs.get(ref.type)
        if definition is None:
            return
        if definition.handler is not None:
            ctx = InputContext(state=state, input_ref=ref, agent=self)
            result = await maybe_await(definition.handler(ref.data, ctx, self))
            if result is not None:
                ref.data = result
        if definition.format is not None:
            ref.text = definition.format(ref)

    async def _run(self, context: Context, args: Any, cid: str, pending: Pending) -> None:
        future = pending.finished
        loop = asyncio.get_running_loop()
        started = loop.time()
        entry: Run | Pending = pending
        cancelled = False
        try:
            chat = await self.chat_of(cid, self.settings_parents(context, args))
            quiet = self.chat_policy.quiet_of(cid, chat)  # (its /quiet, its context type's, or BOT_QUIET_MS)
            if quiet and not self.dispatcher.distributed:  # (a queue waits in Redis: core.fleet)
                await pending.quiet(quiet, cap=self.max_batch)
            state = await self._load_state(context, args, cid, chat)
            state.used = await self._load_used(state)
            if pending.batch is not None:
                state.values.put(BATCH, pending.batch)
            state.ledger = pending.ledger
            run = Run(self.run_deps(), state, finished=future)
            while pending.inputs and not run.full:  # inputs keep arriving while earlier ones are prepared
                ref = pending.inputs.pop(0)
                await self._prepare_input(state, ref)
                run.push(ref)
            run.emitter.listeners.extend(self.event_listeners)
            run.emitter.listeners.extend(pending.listeners)
            self._runs.put(cid, run, origin=pending)
            entry = run
            if pending.stopped:  # Stop was pressed while the run was prepared: nothing is answered
                run.stop()
            async with contextlib.AsyncExitStack() as during:
                if context.while_running is not None:
                    await during.enter_async_context(context.while_running(state, self))
                chain = await run.execute()
                for ended in run.hooks.ended:
                    await ended(chain)
                if context.on_run is not None:
                    try:
                        await maybe_await(context.on_run(state, self))
                    except Exception:
                        log.exception("on_run of context %s raised", context.type)
            if not run.forget:
                run.saving = True
                await self.save_state(state)
                for used in state.used:  # the other contexts it used (Context.uses), through the same store
                    await self.save_state(used)
                for saved in self.hooks.saved:  # (long memory: the history, the summary's next fold)
                    await saved(state, chain)
                if run.trace_id is not None:  # tracing is on
                    await self._remember_trace(cid, run)
            for observer in self.observers:
                observer("run_seconds", cid, loop.time() - started)
            if not future.done():
                future.set_result(chain)
        except BaseException as exc:
            cancelled = not isinstance(exc, Exception)
            if not future.done():
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
                    future.exception()  # marks it retrieved; every waiter re-raises it
            self.states.uncache(cid)  # may hold half a run
            if not isinstance(exc, Exception):
                raise
            log.exception("run of %s crashed", cid)
        finally:
            if isinstance(entry, Run):  # the run is over: the state no longer points back to it (a cycle left
                entry.state.record = None  # for the garbage collector at every message, ~10% of the time)
            self._runs.release(cid, entry)
            self._follow(context, args, cid, pending, cancelled=cancelled)

    def _follow(self, context: Context, args: Any, cid: str, pending: Pending, *, cancelled: bool) -> None:
        """After the run of ``pending``: start the run that follows it (the inputs it had no room for, ``max_batch``),
        or, when it was cancelled, cancel those that follow (their inputs come again from whoever sent them)."""
        if pending.inputs:  # one caller gave more than a run takes: the rest goes first in the next run
            rest = Pending(pending.inputs, None)
            rest.batch, rest.following, pending.inputs = pending.batch, pending.following, []
            rest.ledger = pending.ledger
            pending.following = rest
        following = pending.following
        if following is None:
            return
        if cancelled:
            while following is not None:
                following.finished.cancel()
                following = following.following
            return
        self._runs.put(cid, following)
        self._start(context, args, cid, following, contextvars.copy_context())

    def _start(self, context: Context, args: Any, cid: str, pending: Pending, run_context: contextvars.Context) -> None:
        """Start the run of ``pending`` in a task of the run table. A task cancelled before its first step (a lease
        lost, a join given up, in the instant the run was put in the table) never enters ``_run``, whose clean-up
        would not run: the pending run would stay in the table for good, its callers and every later run of the
        conversation waiting on it. The task's end does that clean-up then."""

        def ended(task: asyncio.Task[Any]) -> None:
            if pending.finished.done():
                return  # (``_run`` ran and settled it)
            pending.finished.cancel()
            self._runs.release(cid, pending)
            self._follow(context, args, cid, pending, cancelled=True)

        self._runs.start(cid, self._run(context, args, cid, pending), context=run_context).add_done_callback(ended)

    async def _remember_trace(self, cid: str, run: Run) -> None:
        """Keep the run's trace id with the conversation (``core.run_traces``; nothing while tracing is off; a
        store that fails is logged)."""
        if run.trace_id is None:
            return
        found = RunTrace(trace_id=run.trace_id, ts=run.started_ms, steps=run.steps)
        try:
            await remember_run(self.memory, cid, found)
        except RunError as exc:
            log.warning("trace of a run of %s not kept: %s", cid, exc)

    def stream(
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        reasoning: bool = True,
        switched: Switched = "type",
    ) -> AsyncIterator[RunEvent]:
        """Send ``input`` and yield the run's events as they happen (runs in this process). ``reasoning=False``
        leaves the reasoning events out; ``switched="item"`` sets ``is_type_switched`` on each new output and every
        tool call and result instead of only on the first event of a new type (``core.event_stream.Switched``)."""

        context = self.registry.resolve(context)

        async def start(listener: Callable[[RunEvent], None]) -> None:
            valid = context.schema.validate(args)
            await self.run(context, valid, [self.make_input(input)], listener=listener)

        return events_of(start, reasoning=reasoning, switched=switched)

    def settings_parents(self, context: Context, args: Any) -> tuple[str, ...]:
        """The ids of the conversations whose chat settings the one of ``context`` and ``args`` starts from
        (``Context.settings_from``: a Discord thread, its channel), nearest first."""
        if context.settings_from is None:
            return ()
        parent = context.settings_from(args)
        return () if parent is None else (self.context_id(context, parent),)

    async def chat_of(self, context_id: str, parents: Sequence[str] = ()) -> ChatSettings:
        """The settings a run of ``context_id`` uses: its choices over its ``parents``' choices, under the operator's
        rules and pins (``ChatPolicy.effective``)."""
        chosen = await self.chat_settings.chosen(context_id, parents)
        return self.chat_policy.effective(context_id, chosen, parents)

    def busy_policy(self, chat: ChatSettings) -> BusyPolicy:
        """What a message sent while the bot answers does in a conversation with the effective settings ``chat``:
        its choice (``/busy``, or a pin), else the operator's (``BOT_BUSY``). A queue worker decides per batch from
        what its take read (``core.fleet``)."""
        return chat.busy_policy() or self.busy

    def is_admin(self, user: str) -> bool:
        """True for a platform-qualified user id (``telegram:123``) listed as an admin (``BOT_ADMIN_USERS``, given
        to the limits and to the chat policy): no limit applies to them, they may ``/reset`` any conversation and
        change its settings."""
        limiter = self.provided(LIMITER)  # (the Limits plugin's)
        return user in self.chat_policy.admin_users or (limiter is not None and limiter.is_admin(user))


create_agent = Agent
"""Build an agent (the seed's ``createAgent``): the same keyword arguments as ``Agent``. Call
``await agent.start()`` (or use ``async with agent:``) before sending to it."""
