"""The agent: registries of definitions, ``send``/``run``/``stream``, and its lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from .chat_settings import ChatPolicy, ChatSettings, ChatSettingsStore
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
from .dispatch import Dispatcher, InProcessDispatcher
from .engine import Run
from .entries import InputRef, Log, WorkingMemory
from .errors import DefinitionError, RunError
from .events import RunEvent, RunEventType
from .host import Check, Observer
from .limits import Limiter
from .media.reader import Fetcher, MediaReader, attachment_outcome
from .memory import HistoryStore, InMemoryStore, MemoryStore, Summary
from .memory.recording import history_entries
from .models.base import Model
from .prompt import DEFAULT_INTRO, FOOTER, INSTRUCTIONS, RESPONSE_FORMAT, TEMPLATE, PromptTemplate
from .run_deps import RunDeps
from .statelog import StateLog
from .summary import Summarizer, SummaryLock, SummaryPolicy
from .task_runner import TaskRunner
from .trace import correlation_id
from .usage import InMemoryUsage, Price, UsageStore

__all__ = ("Agent", "create_agent")

log = logging.getLogger("core.agent")


class Agent:
    """Holds the definitions and runs contexts. Build it with ``create_agent``.

    Handlers, hooks and extensions see it as a ``core.host.Host``, dispatchers and queue workers as a
    ``core.host.Runner``, and each run of the step loop as its ``RunDeps``."""

    def __init__(
        self,
        *,
        model: Model,
        contexts: Sequence[Context] = (),
        extensions: Sequence[Extension] = (),
        actions: Sequence[Action] = (),
        outputs: Sequence[Output] = (),
        inputs: Sequence[Input] = (),
        services: Sequence[Service] = (),
        memory: MemoryStore | None = None,
        dispatcher: Dispatcher | None = None,
        intro: str = DEFAULT_INTRO,
        instructions: str = INSTRUCTIONS,
        response: str = RESPONSE_FORMAT,
        footer: str = FOOTER,
        template: str = TEMPLATE,
        persona: str = "",
        max_tokens: int = 1024,
        model_idle_timeout: float = 60.0,
        output_timeout: float = 60.0,
        queues: Mapping[str, int] | None = None,
        stop_timeout: float = 10.0,
        state_cache: int = 1024,
        compact_prompt: bool = False,
        limiter: Limiter | None = None,
        media: MediaReader | None = None,
        history: HistoryStore | None = None,
        summary: SummaryPolicy | None = None,
        summary_lock: SummaryLock | None = None,
        chat_policy: ChatPolicy | None = None,
        usage: UsageStore | None = None,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        if not isinstance(model, Model):
            raise DefinitionError(
                f"create_agent(model=...): {type(model).__name__} is not a model; a model has the attributes name, "
                "model, vision and last_usage and a stream(request) method (core.Model; ScriptedModel shows them)"
            )
        self.model = model
        """The model every run uses."""
        self.memory: MemoryStore = memory if memory is not None else InMemoryStore()
        """Where context memory and working memory are kept."""
        self.chat_settings = ChatSettingsStore(self.memory)
        """Each conversation's settings (``/model``, ``/persona``, ``/language``, ``/reply``), kept in the memory
        store."""
        self.dispatcher: Dispatcher = dispatcher if dispatcher is not None else InProcessDispatcher()
        """How ``send`` reaches ``run``."""
        self.history: HistoryStore | None = history
        """Where every input and output is kept and searched (None: only the working memory is kept)."""
        self.summarizer: Summarizer | None = (
            Summarizer(self, history, summary, lock=summary_lock)
            if history is not None and summary is not None and summary.every > 0
            else None
        )
        """Folds what leaves the prompt's window into each conversation's summary, after its runs."""
        self.prompt = PromptTemplate(
            template=template, intro=intro, instructions=instructions, response=response, footer=footer
        )
        """The prompt's sections and how they are arranged (``core.prompt.PromptTemplate``)."""
        self.persona = persona
        """Who the bot is, added to the system prompt."""
        self.compact_prompt = compact_prompt
        """Use the short, tool-less prompt made for small local models."""
        self.limiter = limiter
        """Per-user and per-conversation limits checked before the model is called (None: no limits); the token
        limits read ``usage``."""
        self.media: MediaReader = media if media is not None else MediaReader()
        """Reads attachments when a run starts; extensions register how their platform's files are fetched."""
        self.chat_policy: ChatPolicy = chat_policy if chat_policy is not None else ChatPolicy()
        """The operator's rules for settings changed from the chat (allowed models, pins, admins)."""
        self.usage: UsageStore = usage if usage is not None else InMemoryUsage()
        """Tokens and estimated cost per day, per user, conversation and model (``/stats`` and the token limits)."""
        self.prices: dict[str, Price] = dict(prices or {})
        """What each model costs (dollars per million tokens), by model name."""
        self.max_tokens = max_tokens
        """Upper bound on tokens per model call."""
        self.model_idle_timeout = model_idle_timeout
        """Seconds the model may stay silent before the call fails."""
        self.output_timeout = output_timeout
        """Seconds an output handler may take."""
        self.stop_timeout = stop_timeout
        """Seconds ``stop()`` waits for running runs, then for fire-and-forget calls, before cancelling them."""
        self.state_cache = 0 if self.dispatcher.distributed else state_cache
        """How many contexts' working memories stay loaded between runs (0 when other processes share the
        memory store, as Redis workers do)."""
        self._wm_cache: OrderedDict[str, WorkingMemory] = OrderedDict()
        self.state_log_limit = 100
        """A context's state log is compacted into snapshots when it grows past this many entries."""
        self.tasks = TaskRunner(dict(queues or {}))
        """Where action handlers run."""
        self.observers: list[Observer] = []
        """Metric hooks."""
        self.event_listeners: list[Callable[[RunEvent], Any]] = []
        """Listeners that see the events of every run."""
        self.readiness: dict[str, Check] = {}
        """Readiness checks by name (``/readyz``), registered by extensions and services: each returns (or
        awaits to) ``True``/``None`` when ready, ``False`` or a reason string when not, or raises; a
        ``Degraded`` reason is reported while the process stays ready."""
        self.failure: BaseException | None = None
        """The error a service could not recover from, reported with ``fail`` (the first one), else None."""
        self._failed = asyncio.Event()
        self.extensions = tuple(extensions)
        self.contexts: dict[str, Context] = {}
        """Contexts by type."""
        self.actions: list[Action] = []
        """Actions offered everywhere (subject to their ``context`` and ``enabled``)."""
        self.action_sources: list[Callable[[ContextState], Iterable[Action]]] = []
        """Actions that come and go while the agent runs (the tools of an MCP server, hidden while it is
        down): each source is asked at every step; a name already taken by a fixed action is skipped."""
        self.outputs: list[Output] = []
        """Outputs offered everywhere (subject to their ``context`` and ``enabled``)."""
        self.inputs: dict[str, Input] = {}
        """Inputs by type."""
        self.services: list[Service] = list(services)
        self._runs: dict[str, Run | _Pending] = {}
        self._run_tasks: set[asyncio.Task[Any]] = set()
        self._task_of: dict[str, asyncio.Task[Any]] = {}
        self._unsubscribers: list[Callable[[], Any]] = []
        self._started = False
        self._stopping = False
        for ext in self.extensions:
            self._register(ext.contexts, ext.actions, ext.outputs, ext.inputs, owner=f"extension {ext.name!r}")
            self.services.extend(ext.services)
        self._register(contexts, actions, outputs, inputs, owner="create_agent")

    # -- registry --------------------------------------------------------------------------------------

    def _register(
        self,
        contexts: Sequence[Context],
        actions: Sequence[Action],
        outputs: Sequence[Output],
        inputs: Sequence[Input],
        *,
        owner: str,
    ) -> None:
        for ctx in contexts:
            if ctx.type in self.contexts and self.contexts[ctx.type] is not ctx:
                raise DefinitionError(f"{owner}: context type {ctx.type!r} is defined twice")
            self.contexts[ctx.type] = ctx
            for inp in ctx.inputs:
                self.inputs.setdefault(inp.type, inp)
        for act in actions:
            if any(a.name == act.name and a is not act for a in self.actions):
                raise DefinitionError(f"{owner}: action {act.name!r} is defined twice")
            if act not in self.actions:
                self.actions.append(act)
        for out in outputs:
            if any(o.type == out.type and o is not out for o in self.outputs):
                raise DefinitionError(f"{owner}: output {out.type!r} is defined twice")
            if out not in self.outputs:
                self.outputs.append(out)
        for inp in inputs:
            if inp.type in self.inputs and self.inputs[inp.type] is not inp:
                raise DefinitionError(f"{owner}: input {inp.type!r} is defined twice")
            self.inputs[inp.type] = inp

    def available(self, state: ContextState) -> tuple[list[Action], list[Output]]:
        """The actions and outputs offered to the model in ``state``'s context."""
        ctx = state.context
        actions = [
            a
            for a in (*ctx.actions, *self.actions)
            if (a.context is None or a.context is ctx) and (a.enabled is None or a.enabled(state))
        ]
        if self.action_sources:
            taken = {a.name for a in actions}
            for source in self.action_sources:
                for a in source(state):
                    fits = a.context is None or a.context is ctx
                    if fits and a.name not in taken and (a.enabled is None or a.enabled(state)):
                        taken.add(a.name)
                        actions.append(a)
        outputs = [
            o
            for o in (*ctx.outputs, *self.outputs)
            if (o.context is None or o.context is ctx) and (o.enabled is None or o.enabled(state))
        ]
        return actions, outputs

    def context_id(self, context: Context, args: Any) -> str:
        """``<type>:<key>`` of the instance ``args`` names."""
        return f"{context.type}:{context.key(args)}"

    def state_of(self, context_id: str) -> ContextState | None:
        """The state of the run of ``context_id`` going on in this process, None between runs. Event
        listeners use it to find where an output they see streaming will go (``RunEvent.context_id``)."""
        run = self._runs.get(context_id)
        return run.state if isinstance(run, Run) else None

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Install definitions, start services and the dispatcher, subscribe inputs."""
        if self._started:
            return
        self._started = True
        for ext in self.extensions:
            if ext.install is not None:
                await maybe_await(ext.install(self))
        contexts = self.contexts.values()
        definitions: dict[int, Action | Output | Input] = {}  # each once, though offered in several places
        everything: tuple[Action | Output | Input, ...] = (
            *self.actions,
            *(a for c in contexts for a in c.actions),
            *self.outputs,
            *(o for c in contexts for o in c.outputs),
            *self.inputs.values(),
        )
        for d in everything:
            definitions.setdefault(id(d), d)
        for definition in definitions.values():
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
        if self._run_tasks:
            _, pending = await asyncio.wait(set(self._run_tasks), timeout=self.stop_timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        await self.tasks.close(self.stop_timeout)  # fire-and-forget calls: finished, or cancelled
        for svc in reversed(self.services):
            if svc.stop is not None:
                try:
                    await maybe_await(svc.stop(self))
                except Exception:
                    log.exception("service %s failed to stop", svc.name)
        if self.summarizer is not None:
            await self.summarizer.stop()
        await self.memory.close()
        if self.history is not None:
            await self.history.close()
        await self.usage.close()

    @property
    def running(self) -> bool:
        """True between ``start()`` and the beginning of ``stop()``."""
        return self._started and not self._stopping

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

    # -- what extensions register ---------------------------------------------------------------------
    # The declared surface an extension, a service or a dispatcher uses to plug into the agent: each call
    # returns a function that takes the registration back. Nothing outside core mutates the containers.

    @property
    def distributed(self) -> bool:
        """True when a queue shared with other processes runs the contexts (``Dispatcher.distributed``)."""
        return self.dispatcher.distributed

    @property
    def readiness_checks(self) -> Mapping[str, Check]:
        """The readiness checks registered so far, by name: a read-only view (``add_readiness`` changes it)."""
        return MappingProxyType(self.readiness)

    def add_readiness(self, name: str, check: Check) -> Callable[[], None]:
        """Register the readiness check ``name`` (``/readyz``): it returns (or awaits to) ``True``/``None``
        when ready, ``False`` or a reason string when not, or raises; a ``Degraded`` reason is reported while
        the process stays ready. A second check of the same name replaces the first."""
        self.readiness[name] = check

        def remove() -> None:
            if self.readiness.get(name) is check:
                del self.readiness[name]

        return remove

    def add_observer(self, observer: Observer) -> Callable[[], None]:
        """Have ``observer(kind, context_id, value)`` see what the agent measures (metrics)."""
        if observer not in self.observers:
            self.observers.append(observer)
        return lambda: _discard(self.observers, observer)

    def add_event_listener(self, listener: Callable[[RunEvent], Any]) -> Callable[[], None]:
        """Have ``listener`` see the events of every run in this process (live replies, metrics)."""
        if listener not in self.event_listeners:
            self.event_listeners.append(listener)
        return lambda: _discard(self.event_listeners, listener)

    def add_action_source(self, source: Callable[[ContextState], Iterable[Action]]) -> Callable[[], None]:
        """Offer the actions ``source`` gives at each step (tools that come and go, such as an MCP server's);
        a name already taken by a fixed action is skipped."""
        if source not in self.action_sources:
            self.action_sources.append(source)
        return lambda: _discard(self.action_sources, source)

    def add_media_fetcher(self, source: str, fetch: Fetcher) -> Callable[[], None]:
        """Fetch the attachments whose ``source`` is ``source`` (a platform) with ``fetch`` when a run reads
        them; a worker reads what a gateway only referenced."""
        self.media.fetchers[source] = fetch

        def remove() -> None:
            if self.media.fetchers.get(source) is fetch:
                del self.media.fetchers[source]

        return remove

    def add_service(self, svc: Service, *, first: bool = False) -> Callable[[], None]:
        """Start ``svc`` with the agent (before the others when ``first``) and stop it in reverse order.
        Services added after ``start()`` are only stopped."""
        if first:
            self.services.insert(0, svc)
        else:
            self.services.append(svc)
        return lambda: _discard(self.services, svc)

    def pin_settings(self, context_id: str, pins: Mapping[str, str]) -> None:
        """Hold chat settings of ``context_id`` (and the conversations that take their settings from it) at
        the operator's values: the chat cannot change them (``ChatPolicy.pinned``)."""
        self.chat_policy.pinned.setdefault(context_id, {}).update(pins)

    # -- memory ----------------------------------------------------------------------------------------

    async def load_state(self, context: Context, args: Any) -> ContextState:
        """Load (or create) the state of the instance ``args`` names."""
        cid = self.context_id(context, args)
        if context.load is not None:
            stored = await maybe_await(context.load(cid, self))
        else:
            stored = await self.memory.get(f"context:{cid}")
        working = self._wm_cache.pop(cid, None)
        if working is None:
            raw_logs = await self.memory.get(f"working:{cid}")
            working = WorkingMemory.load(raw_logs, limit=context.keep_logs)
        state = ContextState(
            id=cid,
            context=context,
            args=args,
            key=context.key(args),
            memory=None,
            working_memory=working,
            state_log=StateLog.load(await self.memory.get(f"statelog:{cid}")),
            chat=await self.chat_of(cid, self.settings_parents(context, args)),
        )
        if self.history is not None:
            state.summary = (await self.history.summary(cid)).text
        if stored is None:
            stored = await maybe_await(context.create(state)) if context.create is not None else {}
        else:
            stored = copy.deepcopy(stored)  # a run that fails half-way must not change the stored value
        state.memory = stored
        return state

    async def save_state(self, state: ContextState) -> None:
        """Save the instance's memory and its (trimmed) working memory."""
        state.working_memory.trim()
        if state.context.save is not None:
            await maybe_await(state.context.save(state, self))
        else:
            memory = state.memory.model_dump(mode="json") if hasattr(state.memory, "model_dump") else state.memory
            await self.memory.set(f"context:{state.id}", copy.deepcopy(memory))
        await self.memory.set(f"working:{state.id}", state.working_memory.dump())
        if state.state_log.dirty:
            if len(state.state_log.entries) > self.state_log_limit:
                state.state_log.compact()
            await self.memory.set(f"statelog:{state.id}", state.state_log.dump())
            state.state_log.dirty = False
        if self.state_cache:
            self._wm_cache[state.id] = state.working_memory
            while len(self._wm_cache) > self.state_cache:
                self._wm_cache.popitem(last=False)

    async def reset(self, context: Context, args: Any) -> None:
        """Forget everything about the instance ``args`` names (``/reset``)."""
        args = context.schema.validate(args)
        cid = self.context_id(context, args)
        self._wm_cache.pop(cid, None)
        current = self._runs.get(cid)
        if isinstance(current, Run):
            current.forget = True  # a run in progress must not save back what is being forgotten
        await self.memory.delete(f"context:{cid}")
        await self.memory.delete(f"working:{cid}")
        await self.memory.delete(f"statelog:{cid}")
        if self.history is not None:  # the summary goes too; the history stays searchable (``forget`` erases it)
            try:
                newest = await self.history.search(cid, limit=1)
                old = await self.history.summary(cid)
                upto = max(old.upto, newest[0].seq if newest else 0)
                await self.history.set_summary(cid, Summary(text="", upto=upto), expected=old.upto)
            except RunError as exc:
                log.warning("reset of %s: the summary is kept (history store unavailable): %s", cid, exc)

    async def forget(self, context: Context, args: Any) -> None:
        """Erase everything about the instance ``args`` names (``/forget``): its memory, facts and state
        as ``reset`` does, and its full history and summary."""
        args = context.schema.validate(args)
        cid = self.context_id(context, args)
        if self.summarizer is not None:
            self.summarizer.cancel(cid)
        await self.reset(context, args)
        if self.history is not None:
            await self.history.forget(cid)

    @property
    def sees_images(self) -> bool:
        """True when the model is given images: it declares ``vision`` and the full prompt is used (the
        compact prompt of small local models is text only)."""
        return self.model.vision and not self.compact_prompt

    def run_deps(self) -> RunDeps:
        """What a run of the step loop reads, as the agent is configured now (each run takes its own)."""
        return RunDeps(
            host=self,
            model=self.model,
            max_tokens=self.max_tokens,
            model_idle_timeout=self.model_idle_timeout,
            output_timeout=self.output_timeout,
            prompt=self.prompt,
            persona=self.persona,
            compact_prompt=self.compact_prompt,
            sees_images=self.sees_images,
            limiter=self.limiter,
            usage=self.usage,
            prices=self.prices,
            tasks=self.tasks,
            available=self.available,
            observe=self.observe,
            observe_model=self.observe_model,
            observe_output=self.observe_output,
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

    async def send(
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        dedupe_key: str | None = None,
    ) -> list[Log]:
        """Deliver an input to the instance ``args`` names. With the in-process dispatcher this returns
        the chain of the run that handled it; with a queue it returns once the input is stored."""
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
        options: Mapping[str, Any] | None = None,
    ) -> list[Log]:
        """Run the instance with ``inputs``; if it is already running here, the inputs join that run.

        ``options`` are copied into ``state.options`` when a new run starts (a queue passes the batch id
        there for output handlers); inputs that join a running run leave its options as they are."""
        cid = self.context_id(context, args)
        while True:
            current = self._runs.get(cid)
            if current is None:
                break
            if isinstance(current, _Pending):
                current.inputs.extend(inputs)
                if listener is not None:
                    current.listeners.append(listener)
                return await asyncio.shield(current.finished)
            if current.accepting:
                if listener is not None:
                    current.emitter.listeners.append(listener)
                for ref in inputs:
                    await self._prepare_input(current.state, ref)
                    current.push(ref)
                return await asyncio.shield(current.finished)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(current.finished)  # closing: wait until its memory is saved
        pending = _Pending(list(inputs), listener)
        pending.options = dict(options or {})
        self._runs[cid] = pending
        run_context = contextvars.copy_context()
        if run_context.get(correlation_id) is None:  # a queue worker: take the id the input carried
            carried = next((ref.correlation_id for ref in inputs if ref.correlation_id), None)
            run_context.run(correlation_id.set, carried)
        task = asyncio.create_task(self._run(context, args, cid, pending), name=f"run:{cid}", context=run_context)
        self._run_tasks.add(task)
        self._task_of[cid] = task
        task.add_done_callback(self._run_tasks.discard)
        task.add_done_callback(lambda t: self._task_of.pop(cid, None) if self._task_of.get(cid) is t else None)
        return await asyncio.shield(pending.finished)

    def cancel_run(self, context_id: str) -> bool:
        """Cancel the run of ``context_id`` going on in this process, without saving its memory (a queue
        worker lost the context's lease). True if there was one to cancel."""
        task = self._task_of.get(context_id)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def _prepare_input(self, state: ContextState, ref: InputRef) -> None:
        if ref.attachments:  # fetched here, in the process that runs the context (a worker, with a queue)
            prepared = await self.media.prepare(ref.attachments, state.media, vision=self.sees_images)
            if prepared.heard:
                text = ref.data if isinstance(ref.data, str) else ""
                ref.data = f"{text}\n{prepared.heard}" if text.strip() else prepared.heard
            for attachment in ref.attachments:
                self.observe(
                    f"attachment:{attachment.kind.value}:{attachment_outcome(attachment, state.media)}", state.id
                )
            if prepared.fetched_bytes:
                self.observe("attachment_bytes", state.id, prepared.fetched_bytes)
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

    async def _run(self, context: Context, args: Any, cid: str, pending: _Pending) -> None:
        future = pending.finished
        loop = asyncio.get_running_loop()
        started = loop.time()
        entry: Run | _Pending = pending
        try:
            state = await self.load_state(context, args)
            state.options.update(pending.options)
            run = Run(self.run_deps(), state, finished=future)
            while pending.inputs:  # inputs keep arriving while earlier ones are prepared
                ref = pending.inputs.pop(0)
                await self._prepare_input(state, ref)
                run.push(ref)
            run.emitter.listeners.extend(self.event_listeners)
            run.emitter.listeners.extend(pending.listeners)
            self._runs[cid] = entry = run
            async with contextlib.AsyncExitStack() as during:
                if context.while_running is not None:
                    await during.enter_async_context(context.while_running(state, self))
                chain = await run.execute()
                if context.on_run is not None:
                    try:
                        await maybe_await(context.on_run(state, self))
                    except Exception:
                        log.exception("on_run of context %s raised", context.type)
            if not run.forget:
                await self._record(state, chain)
                await self.save_state(state)
            for observer in self.observers:
                observer("run_seconds", cid, loop.time() - started)
            if not future.done():
                future.set_result(chain)
            if self.summarizer is not None and not run.forget:
                self.summarizer.schedule(cid)  # after the answer: never delays it
        except BaseException as exc:
            if not future.done():
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
                    future.exception()  # marks it retrieved; every waiter re-raises it
            self._wm_cache.pop(cid, None)  # may hold half a run
            if not isinstance(exc, Exception):
                raise
            log.exception("run of %s crashed", cid)
        finally:
            if self._runs.get(cid) is entry:
                del self._runs[cid]

    async def _record(self, state: ContextState, chain: Sequence[Log]) -> None:
        """Add the run's inputs and outputs to the full history (a store that fails is logged: the
        conversation goes on without it)."""
        if self.history is None:
            return
        entries = history_entries(state, chain)
        try:
            await self.history.append(state.id, entries)
        except RunError as exc:
            log.warning("history of %s: %d entries not stored: %s", state.id, len(entries), exc)

    def stream(
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        reasoning: bool = True,
    ) -> AsyncIterator[RunEvent]:
        """Send ``input`` and yield the run's events as they happen (runs in this process)."""
        return self._stream(context, args, input, reasoning=reasoning)

    async def _stream(
        self,
        context: Context,
        args: Any,
        input: InputRef | Mapping[str, Any],
        *,
        reasoning: bool,
    ) -> AsyncIterator[RunEvent]:
        queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        args = context.schema.validate(args)
        ref = self.make_input(input)

        async def drive() -> None:
            try:
                await self.run(context, args, [ref], listener=queue.put_nowait)
            finally:
                queue.put_nowait(None)

        task = asyncio.create_task(drive())
        try:
            while True:
                event = await queue.get()
                if event is None:
                    break
                if event.type == RunEventType.REASONING and not reasoning:
                    continue
                yield event
                if event.type == RunEventType.ERROR:
                    break
        finally:
            if not task.done():
                await asyncio.shield(task)
            task.result()

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

    def is_admin(self, user: str) -> bool:
        """True for a platform-qualified user id (``telegram:123``) listed as an admin (``BOT_ADMIN_USERS``, given
        to the limits and to the chat policy): no limit applies to them, they may ``/reset`` any conversation and
        change its settings."""
        return user in self.chat_policy.admin_users or (self.limiter is not None and self.limiter.is_admin(user))

    def observe(self, kind: str, context_id: str, value: float = 1.0) -> None:
        """Report ``value`` of ``kind`` for ``context_id`` (or a platform name) to the observers; an observer
        that raises is logged, never propagated."""
        for observer in self.observers:
            try:
                observer(kind, context_id, value)
            except Exception:
                log.exception("observer %r raised on %s", observer, kind)

    def observe_model(self, context_id: str, seconds: float) -> None:
        """Report a model call's duration to the observers."""
        for observer in self.observers:
            observer("model_seconds", context_id, seconds)

    def observe_output(self, context_id: str, output_type: str) -> None:
        """Report a delivered output to the observers."""
        for observer in self.observers:
            observer("output", context_id, 1.0)


class _Pending:
    """Stands in the registry while a new run loads its state; inputs that arrive meanwhile wait here."""

    def __init__(self, inputs: list[InputRef], listener: Callable[[RunEvent], Any] | None) -> None:
        self.inputs = inputs
        self.listeners: list[Callable[[RunEvent], Any]] = [listener] if listener is not None else []
        self.options: dict[str, Any] = {}
        self.finished: asyncio.Future[list[Log]] = asyncio.get_running_loop().create_future()


create_agent = Agent
"""Build an agent (the seed's ``createAgent``): the same keyword arguments as ``Agent``. Call
``await agent.start()`` (or use ``async with agent:``) before sending to it."""


def _discard(items: list[Any], item: Any) -> None:
    with contextlib.suppress(ValueError):
        items.remove(item)
