"""The step loop: one run of one context instance (seed: Agent Lifecycle).

Each step builds the prompt, streams the model's answer through the incremental parser and acts on every
element as it closes: reasoning becomes a thought, action calls start in the task runner, outputs run in
order. The loop goes on while unprocessed logs remain (action results, errors the model must see, inputs
that joined the run) and the step budget allows. Nothing the model writes raises out of a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from . import tracing
from .action_calls import start_call
from .chat_settings import escape_persona
from .definitions import ContextState, maybe_await
from .delivery import abandon_outputs, close_output, open_output, output_text, post_text
from .entries import ErrorLog, InputRef, Log, Thought, now_ms
from .errors import DispatchError, ModelError, RunError
from .events import EventEmitter, RunEventType
from .model_call import as_response, images_in, model_name, stream_model
from .models.base import ModelRequest
from .parser import StreamParser, TagEnd, TagStart, TagText, Text
from .plugin import NO_HOOKS, ModelCall, PluginHooks
from .prompt import build_compact_prompt, build_prompt, quiet_params
from .step import Step
from .turns import TURN_STOPS
from .usage import user_of

if TYPE_CHECKING:
    from .definition_types import Host
    from .run_deps import RunDeps

__all__ = ("Run",)

log = logging.getLogger("core.engine")

COMPACT_MAX_TOKENS = 160
"""Tokens of a compact prompt's plain reply at most (one or two short sentences; a small model that goes on
only drifts further from the question)."""
HARD_STEP_CAP = 50
"""No run takes more model calls than this, however many inputs keep joining it."""
RESTART_CAP = 20
"""A step's model call starts again with the inputs that joined it at most this many times (``Run.restart``);
after that, what joins waits for the next step."""
STOP_MARK = " [stopped]"
FORMAT_FAILED_NOTICE = "Sorry, the model's answer could not be read, so I have no reply this time. Please try again."
"""Said in the conversation when a run ends with nothing delivered because the model wrote plain text outside the
response format at its last step (``model_format_failed``: a model failure, counted and alerted on)."""
FORMAT_FAILED_NOTICES = {
    "en": FORMAT_FAILED_NOTICE,
    "fr": "Désolé, la réponse du modèle était illisible : je n'ai pas de réponse cette fois. Réessayez, s'il vous "
    "plaît.",
}
"""``FORMAT_FAILED_NOTICE`` in the languages of the bot's own messages (a conversation's ``/language``)."""
"""Added to what an output had written when its answer was stopped (``Run.stop``)."""


class Run:
    """One run of one context instance. Inputs that arrive while it runs join it."""

    def __init__(self, deps: RunDeps, state: ContextState, *, finished: asyncio.Future[list[Log]]) -> None:
        self.deps = deps
        """What the run needs from the agent (``Agent.run_deps``)."""
        self.state = state
        self.finished = finished
        """Resolved with the chain once the run is over and its memory saved."""
        self.chain: list[Log] = []
        """Every log entry this run produced or received, in order."""
        self.accepting = True
        """False once the run has decided to finish; later inputs start a new run."""
        self.emitter = EventEmitter(state.id)
        """Run events go to its listeners."""
        self.steps = 0
        """Model calls made so far."""
        self.forget = False
        """Set by ``agent.reset`` during the run: its memory is not saved at the end."""
        self.saving = False
        """Set once the run has begun to save its memory (too late for ``forget``: a reset waits for it to end)."""
        self.asker: str | None = None
        """Who wrote the newest input shown to the model (``discord:123``): its usage is counted to them."""
        self.trace_id: str | None = None
        """The id of the trace the run is part of (32 hex digits), None while tracing is off."""
        self.started_ms = now_ms()
        """When the run started, in ms since the epoch."""
        self.hooks: PluginHooks = NO_HOOKS
        """The hooks of the agent's plugins in this run (``core.plugin``)."""
        state.record = self.record  # what the context records (state.emit) joins this run's chain
        self._joined = False
        self._joining = 0
        self._settled: asyncio.Event | None = None
        self._first_input_ms: int | None = None
        self._replied = False
        self._delivered = 0
        self._unread: str | None = None  # the model whose last answer ignored the response format, if it did
        self._notices = 0
        self._taken = 0
        self._answered: set[int] = set()  # (ids of the inputs read before the run last finished an answer: ``turn``)
        self._tasks: asyncio.TaskGroup | None = None
        self.stopped = False
        """Set by ``stop``: the answer was stopped; no further action or step runs."""
        self._stoppable: asyncio.Task[Any] | None = None
        self._stop_cancelled = False
        self._streaming: Step | None = None
        self._visible = False  # a word of the answer was shown, or a call started: it no longer starts again
        self._restart_cancelled = False
        self._heard = 0  # characters the step's model call streamed so far
        self._carried: list[Log] = []  # what a cancelled call had read: read again, not admitted again
        self.restarts = 0
        """Model calls cancelled and started again because inputs joined before a word was shown (``restart``)."""
        if deps.plugins:
            self.hooks = PluginHooks.of([part for p in deps.plugins if (part := p.begin(self)) is not None])

    # -- the run as plugins see it (``core.plugin.RunView``) -------------------------------------------

    @property
    def host(self) -> Host:
        """The agent, as handlers see it."""
        return self.deps.host

    @property
    def turn(self) -> list[InputRef]:
        """The inputs of the turn being answered, oldest first: the run's, less those it had read when it last
        finished an answer (a step that delivered an output and called nothing). An input that joins once an answer
        is out (the run still finishing, or its words already shown) starts a turn of its own, as it would the next
        run: the model answers its author, not everyone the run has read (the facts it may show, who keeps one)."""
        return [e for e in self.chain if isinstance(e, InputRef) and id(e) not in self._answered]

    def observe(self, kind: str, value: float = 1.0) -> None:
        """Report a measure of the run to the agent's observers."""
        self.deps.observe(kind, self.state.id, value)

    def drop(self, entry: InputRef) -> None:
        """An input the run will not answer: out of working memory and of the chain the history keeps."""
        entry.processed = True
        logs = self.state.working_memory.logs
        if entry in logs:
            logs.remove(entry)
        if entry in self.chain:
            self.chain.remove(entry)

    async def say(self, text: str, *, record: bool = False) -> None:
        """Post ``text`` as written through the conversation's own output, without the model (each at an element
        index of its own, below those of responses); raises the output's errors."""
        self._notices += 1
        await post_text(self, text, index=-self._notices, record=record)

    def spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` within the current step (or now, between steps)."""
        if self._tasks is None:
            raise RuntimeError("Run.spawn is called during a step")
        self._tasks.create_task(_awaited(work))

    # -- log entries -----------------------------------------------------------------------------------

    @property
    def full(self) -> bool:
        """The run took as many inputs as one run answers (``RunDeps.max_batch``): the next wait for the next run."""
        cap = self.deps.max_batch
        return bool(cap) and self._taken >= cap

    def push(self, ref: InputRef) -> None:
        """Add an input to the run; the next step shows it to the model."""
        self.state.working_memory.push(ref)
        self.chain.append(ref)
        self._taken += 1
        self._joined = True
        for joined in self.hooks.joined:
            joined(ref)
        if self._first_input_ms is None or ref.timestamp < self._first_input_ms:
            self._first_input_ms = ref.timestamp

    async def join(
        self, refs: Sequence[InputRef], prepare: Callable[[ContextState, InputRef], Awaitable[None]]
    ) -> list[InputRef]:
        """Add inputs that arrived while the run goes on, each prepared first (``prepare`` may wait: a fetch, an
        input handler reading a store); the run does not end while one is being prepared (``_more_joined``), so
        each is prepared once, against the state that is saved. The ones it could not take all the same (it failed
        meanwhile, or reached ``HARD_STEP_CAP``), to start a new run with: they are prepared again there."""
        self._joining += 1
        try:
            for i, ref in enumerate(refs):
                if self.full:
                    return list(refs[i:])
                await prepare(self.state, ref)
                if not self.accepting or self.full:
                    return list(refs[i:])
                self.push(ref)
            return []
        finally:
            self._joining -= 1
            if not self._joining and self._settled is not None:
                self._settled.set()

    async def _more_joined(self) -> bool:
        """Before the run ends: wait for the inputs still being prepared to join it; True when one was pushed
        (it is owed a step)."""
        if not self._joining or self.steps >= HARD_STEP_CAP:
            return False
        while self._joining:
            self._settled = asyncio.Event()
            await self._settled.wait()
        return any(isinstance(p, InputRef) for p in self.state.working_memory.unprocessed())

    def stop(self) -> bool:
        """Stop the answer (a person pressed Stop): the model call is cancelled now, what its outputs had written is
        delivered with ``STOP_MARK``, no further action or step runs, and the run ends (its memory saved, the stop
        recorded); an input sent from now on starts the next run rather than joining this one. False when the run
        was not answering any more."""
        if self.stopped or not self.accepting:
            return False
        self.stopped = True
        self.accepting = False  # (a message sent after the Stop starts the next run: this one answers nothing more)
        task = self._stoppable
        if task is not None and not task.done():
            self._stop_cancelled = True
            task.cancel()
        return True

    @property
    def unseen(self) -> bool:
        """Nothing of the answer is visible yet (no output's text shown, no action call started) and the run still
        takes inputs: one that joins now is answered together with the others by starting the model call again
        (``restart``), whatever the busy policy (``core.busy``)."""
        return self.accepting and not self.stopped and not self._visible and self.restarts < RESTART_CAP

    def restart(self) -> bool:
        """Inputs joined before a word of the answer was shown: the model call under way is cancelled (counted,
        its tokens charged as a cancelled call) and the step starts again with them (``core.busy``). False when
        no model call is under way (the next step reads them) or words are already visible."""
        task = self._stoppable
        if not self.unseen or task is None or task.done() or self._restart_cancelled:
            return False
        self._restart_cancelled = True
        task.cancel()
        return True

    def record(self, entry: Log) -> None:
        """Add an entry the run produced to working memory and the chain."""
        self.state.working_memory.push(entry)
        self.chain.append(entry)

    def error(self, message: str, *, source: str) -> None:
        """Record an error the model reads in the next step."""
        self.record(ErrorLog(message=message, source=source))

    def delivered(self, output_type: str) -> None:
        """An output was delivered: counted, and the first one of the run times the reply."""
        self.deps.observe_output(self.state.id, output_type)
        self._delivered += 1
        if not self._replied and self._first_input_ms is not None:
            self._replied = True
            self.deps.observe("reply_seconds", self.state.id, max(0, now_ms() - self._first_input_ms) / 1000)

    # -- the loop --------------------------------------------------------------------------------------

    def execute(self) -> Coroutine[Any, Any, list[Log]]:
        """Step until nothing is left to process, a step adds nothing new, or the step budget is spent."""
        return self._traced() if tracing.active() else self._execute()  # while off: no span, no extra frame

    async def _traced(self) -> list[Log]:
        with tracing.span(f"invoke_agent {self.state.context.type}") as span:
            if span.is_recording():
                ids = tracing.current_ids()
                self.trace_id = ids[0] if ids is not None else None
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "invoke_agent",
                        "bots.context.type": self.state.context.type,
                        "bots.context.id": tracing.ident(self.state.id),
                    }
                )
            chain = await self._execute()
            if span.is_recording():
                span.set_attribute("bots.run.steps", self.steps)
            return chain

    async def _execute(self) -> list[Log]:
        ctx = self.state.context
        since_input = 0
        try:
            while True:
                self._joined = False
                self.steps += 1
                since_input += 1
                self.emitter.step = self.steps
                delivered = self._delivered
                if tracing.active():
                    with tracing.span("step") as span:
                        span.set_attribute("bots.step", self.steps)
                        step = await self._step()
                else:
                    step = await self._step()
                if self.stopped:
                    self._note_stop()
                    break
                if step is not None and self._delivered > delivered and not step.calls:  # an answer is out
                    self._answered = {id(e) for e in self.chain if isinstance(e, InputRef) and e.processed}
                if ctx.on_step is not None:
                    await maybe_await(ctx.on_step(self.state, self.deps.host))
                if self._joined:
                    since_input = 0
                pending = self.state.working_memory.unprocessed()
                if self.steps >= HARD_STEP_CAP:
                    break
                if step is not None and step.added_nothing:  # every call and output refused as a repeat: stop here
                    for entry in pending:
                        entry.processed = entry.processed or not isinstance(entry, InputRef)
                    pending = [p for p in pending if isinstance(p, InputRef)]
                    if not pending:
                        if not await self._more_joined():
                            break
                        since_input = 0
                        continue
                if pending and since_input < ctx.max_steps:
                    continue
                if (
                    not pending
                    and ctx.should_continue is not None
                    and since_input < ctx.max_steps
                    and ctx.should_continue(self.state, self.deps.host)
                ):
                    continue
                if any(isinstance(p, InputRef) for p in pending) and self.steps < HARD_STEP_CAP:
                    since_input = 0  # an input joined after the last prompt: it is owed a step
                    continue
                if await self._more_joined():
                    since_input = 0
                    continue
                break
            self.accepting = False  # (no wait since the last look: an input joining now starts the next run)
            if self._unread is not None and not self._delivered and not self.stopped:
                await self._format_failed(self._unread)
        except DispatchError:
            self.accepting = False
            raise  # the queue's storage failed: not the model's to read; a queued batch is not acknowledged
        except Exception as exc:
            self.accepting = False
            await self._fail(exc)
        return self.chain

    async def _format_failed(self, model: str) -> None:
        """The run ends with nothing said because the model's last answer ignored the response format: a model
        failure (``model_format_failed:<model>``, an error event so the run counts as failed), and the person is
        told in a short reply instead of silence."""
        log.warning(
            "run of %s: the model %s answered outside the response format at its last step and nothing was "
            "delivered; the person was told the model failed",
            self.state.id,
            model,
        )
        self.deps.observe(f"model_format_failed:{model}", self.state.id, 1.0)
        entry = ErrorLog(message="the model's answer did not follow the response format", source="model")
        entry.processed = True
        self.record(entry)
        self.emitter.emit(RunEventType.ERROR, entry.message)
        try:
            language = self.state.chat.language or "en"
            await self.say(FORMAT_FAILED_NOTICES.get(language, FORMAT_FAILED_NOTICE))
        except Exception as exc:  # no output to say it through (a context without one): the error event stays
            log.warning("run of %s: the model's failure could not be told: %s", self.state.id, exc)

    async def _fail(self, exc: Exception) -> None:
        tracing.current().set_attribute("error.type", type(exc).__name__)  # the run's span (a no-op while off)
        if isinstance(exc, RunError):  # with the author's traceback when their code raised (a render)
            author = exc.__cause__ is not None and not isinstance(exc, ModelError)
            log.warning("run of %s failed: %s", self.state.id, exc, exc_info=exc if author else None)
        else:
            log.exception("run of %s failed unexpectedly", self.state.id)
        entry = ErrorLog(
            message=str(exc) or type(exc).__name__, source="model" if isinstance(exc, ModelError) else "run"
        )
        entry.processed = True  # recorded, but not a reason for another step
        self.record(entry)
        self.emitter.emit(RunEventType.ERROR, entry.message)
        handler = self.state.context.on_error
        if handler is not None:
            try:
                await maybe_await(handler(exc, self.state, self.deps.host))
            except Exception:
                log.exception("on_error of context %s raised", self.state.context.type)

    async def _charge(
        self,
        request: ModelRequest,
        input_tokens: int,
        output_tokens: int,
        estimated: bool,
        *,
        cancelled: int = 0,
        cached: int = 0,
    ) -> None:
        name = model_name(self.deps, request)
        if not estimated:  # tokens the provider reported go to the observers; estimated ones do not
            self.deps.observe(f"input_tokens:{name}", self.state.id, input_tokens)
            self.deps.observe(f"output_tokens:{name}", self.state.id, output_tokens)
        if self.hooks.charged:
            call = ModelCall(
                request=request,
                model=name,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                estimated=estimated,
                cancelled=cancelled,
                cached_input_tokens=cached,
            )
            await _whole(self._charged(call))

    async def _charged(self, call: ModelCall) -> None:
        """``call``'s tokens to each plugin that counts them (``charged``), one after the other."""
        for charged in self.hooks.charged:
            await charged(call)

    async def _step(self) -> Step | None:
        """One model call and what it wrote (None: every new input was over a limit, the model was not called)."""
        deps, state = self.deps, self.state
        hooks = self.hooks
        actions, outputs = deps.available(state)
        # the input params the prompt leaves out, from all the conversation has: the same whoever the run is for
        quiet = None if deps.compact_prompt else quiet_params(actions, outputs)
        for offer in hooks.offer:  # (trust: only what the run's tier may call is shown, and callable)
            actions = offer(actions)
        pending = state.working_memory.unprocessed()
        carried, self._carried = self._carried, []  # (read by a call that started again: admitted already)
        fresh = [e for e in pending if all(e is not c for c in carried)] if carried else pending
        admitted = fresh
        for admit in hooks.admit:  # (limits, scheduled texts: inputs answered without the model)
            admitted = await admit(admitted)
        if fresh and not admitted and not carried:
            return None  # every new input was answered otherwise: the model is not called
        updates = [e for e in pending if any(e is c for c in (*carried, *admitted))] if carried else admitted
        persona = escape_persona(state.chat.persona) if state.chat.persona else deps.persona
        if deps.compact_prompt:  # a small model: tools only in its own format, if it has one
            offered = actions if deps.calls_tools else []
            prompt = build_compact_prompt(
                state=state,
                outputs=outputs,
                updates=updates,
                persona=persona,
                instructions=deps.instructions,
                actions=offered,
                tools=deps.calls_tools,
            )
            names = {t.name for t in prompt.tools}
            actions = [a for a in offered if a.name in names]
        else:
            prompt = build_prompt(
                state=state,
                actions=actions,
                outputs=outputs,
                updates=updates,
                template=deps.prompt,
                persona=persona,
                quiet=quiet,
            )
        for entry in updates:
            entry.processed = True
            if isinstance(entry, InputRef):
                self.asker = user_of(entry) or self.asker
        request = ModelRequest(
            system=prompt.system,
            prompt=prompt.prompt,
            max_tokens=min(deps.max_tokens, COMPACT_MAX_TOKENS) if deps.compact_prompt else deps.max_tokens,
            output_types=tuple(o.type for o in outputs),
            action_names=tuple(a.name for a in actions),
            max_items=1 if deps.compact_prompt else None,
            metadata={
                "context_id": state.id,
                "inputs": " ".join(e.id for e in updates if isinstance(e, InputRef)),
                # (the call starts the step again with inputs that joined it: the same step to the reply ledger)
                **({"restarted": "1"} if carried else {}),
            },
            model=state.chat.model,
            images=images_in(state, prompt.prompt) if deps.sees_images else (),
            plain=deps.compact_prompt,
            turns=prompt.turns,
            tools=prompt.tools,
            kept=prompt.kept,
            stop=TURN_STOPS if deps.compact_prompt else ("</response>",),
        )
        for allow in hooks.allow:  # (limits: the tokens this call sends against what is left of a day's budget)
            if not await allow(request, updates):
                return None
        parser = StreamParser()
        started = time.perf_counter()
        if self.stopped:
            return None
        task = self._stoppable = asyncio.current_task()
        outside = task.cancelling() if task is not None else 0  # (cancels asked of the task before this call)
        attempt = len(self.chain)
        self._heard = 0
        try:
            return await self._stream(deps, request, prompt, actions, outputs, parser, started)
        except asyncio.CancelledError:
            if task is not None:  # the cancels restart() and stop() asked for are theirs; one from outside is not
                for _ in range(int(self._restart_cancelled) + int(self._stop_cancelled)):
                    task.uncancel()
                if task.cancelling() > outside:
                    # cancelled from outside too (a lost lease) while a restart or a Stop was under way: one
                    # CancelledError comes for all, and taking it as the restart's or the Stop's swallowed the other
                    # (the run went on and answered, its task left cancelling: later timeouts raise CancelledError)
                    self._restart_cancelled = self._stop_cancelled = False
                    raise
            if self._restart_cancelled and not self._stop_cancelled:
                # (no call to cancel while the cancelled one is charged: an input that joins meanwhile is read by the
                # step that follows, a Stop ends it before its call; a cancel here would end the run, its memory lost)
                self._stoppable = self._streaming = self._tasks = None
                await self._restarted(request, updates, attempt)
                self._restart_cancelled = False
                return await self._step()
            if not self._stop_cancelled:
                raise  # cancelled from outside (a lost lease, a stop of the agent): not a person's Stop
            self._stop_cancelled = self._restart_cancelled = False
            step: Step | None = self._streaming
            if step is not None:
                await self._stopped_outputs(step)
            return step
        finally:
            self._stoppable = None
            self._streaming = None
            self._tasks = None

    async def _restarted(self, request: ModelRequest, updates: Sequence[Log], attempt: int) -> None:
        """The step's model call was cancelled because inputs joined before anything was shown (``restart``): what
        it had begun (an output's entry, a thought) leaves the memory, the inputs it read are read again with the
        new ones, and the call is counted (``model_call_restarted``) and charged as estimated, cancelled tokens."""
        self.restarts += 1
        begun = [e for e in self.chain[attempt:] if not isinstance(e, InputRef)]
        if begun:
            self.chain[:] = [e for e in self.chain if all(e is not b for b in begun)]
            logs = self.state.working_memory.logs
            logs[:] = [e for e in logs if all(e is not b for b in begun)]
        tokens_in, tokens_out = (len(request.system) + len(request.prompt)) // 4, self._heard // 4
        log.info("%s: inputs joined before the answer was shown: its model call starts again with them", self.state.id)
        self.deps.observe("model_call_restarted", self.state.id, 1.0)
        self.deps.observe("model_call_restarted_tokens", self.state.id, tokens_in + tokens_out)
        # (charged while the inputs it read are still marked read: each of their authors pays their share, not the
        # newest of them alone)
        await self._charge(request, tokens_in, tokens_out, True, cancelled=self.restarts)
        for read in updates:
            read.processed = False
        self._carried = list(updates)

    async def _stream(
        self,
        deps: RunDeps,
        request: ModelRequest,
        prompt: Any,
        actions: list[Any],
        outputs: list[Any],
        parser: StreamParser,
        started: float,
    ) -> Step:
        """The model call of a step and what it wrote, acted on as it closes."""
        state = self.state
        failure: Exception | None = None
        async with asyncio.TaskGroup() as tg:  # action tasks never raise: they report errors as results
            step = Step(
                {a.name: a for a in actions},
                {o.type: o for o in outputs},
                tg,
                guarded=request.plain,
                speakers=prompt.speakers,
            )
            self._streaming = step
            self._tasks = tg
            stream = stream_model(
                deps,
                request,
                charge=lambda given, taken, guess, cached: self._charge(request, given, taken, guess, cached=cached),
                reasoning=lambda text: self.emitter.emit(RunEventType.REASONING, text),  # a provider's own
            )
            if request.plain:
                chunks: AsyncGenerator[str, None] = as_response(
                    stream, prompt.reply or (outputs[0].type if outputs else ""), step.speakers
                )
            else:
                chunks = stream
            try:
                async with contextlib.aclosing(chunks):  # closed here even when the run is cancelled
                    async for chunk in chunks:  # between two chunks (a lost lease): no stream is left suspended
                        self._heard += len(chunk)
                        for event in parser.feed(chunk):
                            await self._on_event(event, step)
                for event in parser.close():
                    await self._on_event(event, step)
            except Exception as exc:  # raised after the calls already started have finished
                failure = exc
                abandon_outputs(step)
            finally:
                step.calls.close()  # no call can follow: a reference nothing writes stops waiting
        if failure is not None:
            raise failure
        deps.observe_model(state.id, time.perf_counter() - started)
        stray = "".join(step.stray_text).strip()
        self._unread = model_name(deps, request) if step.produced == 0 and stray else None
        if step.produced == 0 and stray:
            self.error(
                "your answer was plain text outside of any tag, so nobody received it; write it inside "
                f'<output type="{outputs[0].type if outputs else "OUTPUT_TYPE"}">...</output> within <response>',
                source="parser",
            )
        return step

    async def _stopped_outputs(self, step: Step) -> None:
        """The answer was stopped while ``step``'s outputs were being written: each is delivered as far as it got,
        marked as stopped (an output with nothing written is dropped)."""
        for index, out in list(step.open.items()):
            written = str(out.ref.content or "").strip()
            if not written:
                step.open.pop(index, None)
                continue
            try:
                await close_output(self, step, TagEnd(name="output", content=written + STOP_MARK, index=index))
            except Exception as exc:
                log.warning("%s: a stopped answer was not delivered: %s", self.state.id, exc)
        step.open.clear()

    def _note_stop(self) -> None:
        """The run ends on a person's Stop: recorded (the model reads it next time) and told to the listeners."""
        for entry in self.state.working_memory.unprocessed():
            entry.processed = True  # not answered: the next message starts afresh
        note = ErrorLog(message="the person stopped this answer before it was finished", source="stop")
        note.processed = True
        self.record(note)
        self.emitter.emit(RunEventType.ERROR, note.message)

    async def _on_event(self, event: object, step: Step) -> None:
        if isinstance(event, TagText):
            if event.name == "reasoning":
                self.emitter.emit(RunEventType.REASONING, event.text)
            elif event.name == "output":
                if not self._visible and event.text.strip():  # (a first word shown: no restart after it)
                    self._visible = True
                templated = output_text(self, step, event)
                if templated is not None:
                    await templated
            return
        if isinstance(event, TagStart):
            if event.name == "output":
                open_output(self, step, event)
            return
        if isinstance(event, Text):
            step.stray_text.append(event.text)
            return
        if not isinstance(event, TagEnd):
            return
        if event.name == "reasoning":
            if event.content.strip():
                self.record(Thought(content=event.content.strip(), processed=True))
        elif event.name == "action_call":
            step.produced += 1
            self._visible = True  # (a call may act on the world: never made twice)
            start_call(self, step, event)
        elif event.name == "output":
            step.produced += 1
            self._visible = True
            await close_output(self, step, event)


async def _awaited(work: Awaitable[None]) -> None:
    await work


async def _whole(work: Coroutine[Any, Any, None]) -> None:
    """Await ``work`` to its end even when the run's task is cancelled meanwhile, then let the cancellation through.
    A call's charge is several writes (the conversation's counter, then each person's share, ``core.usage``); a Stop,
    the ``interrupt`` policy or a restart cancelling the task between two of them, with the store writing in a thread
    or a server, left the conversation charged and the people not (seen in the privacy matrix, issue 49)."""
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as exc:  # (asyncio.wait leaves the task running)
            cancelled = exc
    if cancelled is not None:
        raise cancelled
    task.result()
