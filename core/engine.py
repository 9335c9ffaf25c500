"""The step loop: one run of one context instance (seed: Agent Lifecycle).

Each step builds the prompt, streams the model's answer through the incremental parser and acts on every
element as it closes: reasoning becomes a thought, action calls start in the task runner, outputs run in
order. The loop goes on while unprocessed logs remain (action results, errors the model must see, inputs
that joined the run) and the step budget allows. Nothing the model writes raises out of a run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from .chat_settings import escape_persona
from .dataflow import CallSlot, ResponseCalls
from .definitions import Action, ContextState, Output, maybe_await
from .entries import ActionCall, ActionResult, ErrorLog, InputRef, Log, OutputRef, Thought, now_ms
from .errors import ModelError, RunError
from .events import EventEmitter, RunEventType
from .handlers import declared_targets, delivered_text, output_stream, run_action, run_output
from .limits import Refusal
from .media.attachment import Attachment, image_marker
from .models.base import ImagePart, ModelRequest, call_usage
from .parser import StreamParser, TagEnd, TagStart, TagText, Text
from .prompt import build_compact_prompt, build_prompt, format_value, xml_attr
from .templates import TemplateStream
from .turns import TURN_STOPS, TurnGuard, cut_turns
from .usage import cost_micros, day_of, user_of

if TYPE_CHECKING:
    from .run_deps import RunDeps

__all__ = ("Run",)

log = logging.getLogger("core.engine")

COMPACT_MAX_TOKENS = 160
"""Tokens of a compact prompt's plain reply at most (one or two short sentences; a small model that goes on
only drifts further from the question)."""
HARD_STEP_CAP = 50
"""No run takes more model calls than this, however many inputs keep joining it."""


class _Step:
    """What one step has seen so far."""

    __slots__ = (
        "actions",
        "guarded",
        "guards",
        "output_types",
        "outputs",
        "produced",
        "slots",
        "speakers",
        "stray_text",
        "streams",
        "tasks",
    )

    def __init__(
        self,
        actions: dict[str, Action],
        outputs: dict[str, Output],
        tasks: asyncio.TaskGroup,
        *,
        guarded: bool = False,
        speakers: tuple[str, ...] = (),
    ) -> None:
        self.actions = actions
        self.guarded = guarded
        """Outputs end where the model starts to invent a turn (the compact prompt of small models)."""
        self.speakers = speakers
        self.guards: dict[int, TurnGuard] = {}
        self.outputs = outputs
        self.tasks = tasks
        self.slots = ResponseCalls()
        """The calls of the response as the model writes them; closed once it has ended."""
        self.streams: dict[int, TemplateStream] = {}
        """Resolves the templates of each output's deltas, by element index."""
        self.produced = 0
        self.stray_text: list[str] = []
        self.output_types: dict[int, str] = {}


async def _as_response(chunks: AsyncGenerator[str, None], output_type: str, step: _Step) -> AsyncIterator[str]:
    """A plain-text answer (the compact prompt) as a response with one output of ``output_type``, ended where the
    model starts a turn nobody wrote (the stream is then closed, which stops the generation). An answer that
    starts with ``<`` is the response format already and passes as it is."""
    try:
        async for text in _wrapped(chunks, output_type, step):
            yield text
    finally:
        await chunks.aclose()


async def _wrapped(chunks: AsyncIterator[str], output_type: str, step: _Step) -> AsyncIterator[str]:
    guard = TurnGuard(step.speakers)
    head = ""
    plain: bool | None = None
    async for chunk in chunks:
        if plain is None:
            head += chunk
            if not head.strip():
                continue
            plain = not head.lstrip().startswith("<")
            if not plain:
                yield head
                continue
            yield f'<response><output type="{xml_attr(output_type)}">'
            chunk = head
        if not plain:
            yield chunk
            continue
        text = guard.feed(chunk)
        if text:
            yield text
        if guard.cut:
            break
    if plain is None and head:
        yield head
    elif plain:
        yield guard.close() + "</output></response>"


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
        self.asker: str | None = None
        """Who wrote the newest input shown to the model (``discord:123``): its usage is counted to them."""
        self._joined = False
        self._first_input_ms: int | None = None
        self._replied = False
        self._notices = 0

    # -- inputs ----------------------------------------------------------------------------------------

    def push(self, ref: InputRef) -> None:
        """Add an input to the run; the next step shows it to the model."""
        self.state.working_memory.push(ref)
        self.chain.append(ref)
        self._joined = True
        if self._first_input_ms is None or ref.timestamp < self._first_input_ms:
            self._first_input_ms = ref.timestamp

    def _log(self, entry: Log) -> None:
        self.state.working_memory.push(entry)
        self.chain.append(entry)

    # -- the loop --------------------------------------------------------------------------------------

    async def execute(self) -> list[Log]:
        """Step until nothing is left to process or the step budget is spent."""
        ctx = self.state.context
        since_input = 0
        try:
            while True:
                self._joined = False
                self.steps += 1
                since_input += 1
                self.emitter.step = self.steps
                await self._step()
                if ctx.on_step is not None:
                    await maybe_await(ctx.on_step(self.state, self.deps.host))
                if self._joined:
                    since_input = 0
                pending = self.state.working_memory.unprocessed()
                if self.steps >= HARD_STEP_CAP:
                    break
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
                break
            self.accepting = False
        except Exception as exc:
            self.accepting = False
            await self._fail(exc)
        return self.chain

    async def _fail(self, exc: Exception) -> None:
        if isinstance(exc, RunError):  # with the author's traceback when their code raised (a render)
            author = exc.__cause__ is not None and not isinstance(exc, ModelError)
            log.warning("run of %s failed: %s", self.state.id, exc, exc_info=exc if author else None)
        else:
            log.exception("run of %s failed unexpectedly", self.state.id)
        entry = ErrorLog(
            message=str(exc) or type(exc).__name__, source="model" if isinstance(exc, ModelError) else "run"
        )
        entry.processed = True  # recorded, but not a reason for another step
        self._log(entry)
        self.emitter.emit(RunEventType.ERROR, entry.message)
        handler = self.state.context.on_error
        if handler is not None:
            try:
                await maybe_await(handler(exc, self.state, self.deps.host))
            except Exception:
                log.exception("on_error of context %s raised", self.state.context.type)

    async def _stream(self, request: ModelRequest) -> AsyncGenerator[str, None]:
        """The model's chunks, with a deadline on each; library errors become ``ModelError``."""
        idle = self.deps.model_idle_timeout
        model = self.deps.model
        usage_before = model.last_usage
        call_usage.set(None)
        stream = model.stream(request)
        it = aiter(stream)
        written = 0
        try:
            while True:
                try:
                    async with asyncio.timeout(idle):
                        chunk = await anext(it)
                except StopAsyncIteration:
                    usage = call_usage.get()  # reported by the provider as its stream ended, in this task
                    if usage is None:  # a provider that only sets ``last_usage`` (shared by concurrent runs)
                        usage = model.last_usage
                        usage = None if usage is usage_before else usage
                    if usage is not None:
                        await self._account(request, usage.input_tokens, usage.output_tokens)
                    else:  # the provider does not say: about 4 characters a token, for the limits and /stats
                        tokens_in = (len(request.system) + len(request.prompt)) // 4
                        await self._account(request, tokens_in, written // 4, estimated=True)
                    return
                except TimeoutError as exc:
                    raise ModelError(
                        f"the model sent nothing for {idle:g}s; check the model server or raise LLM_TIMEOUT"
                    ) from exc
                except (RunError, asyncio.CancelledError):
                    raise
                except Exception as exc:
                    raise ModelError(f"model {model.name!r} failed: {type(exc).__name__}: {exc}") from exc
                written += len(chunk)
                yield chunk
        finally:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                await aclose()

    def model_name(self, request: ModelRequest) -> str:
        """The name of the model ``request`` is answered by (a conversation's ``/model`` or the configured one)."""
        return request.model or self.deps.model.model or self.deps.model.name

    async def _account(
        self, request: ModelRequest, input_tokens: int, output_tokens: int, *, estimated: bool = False
    ) -> None:
        """Add a call's tokens to the usage counters of the user who asked, the conversation and the model (what
        ``/stats`` shows and the per-day token limits read), once per batch and step: a batch run again after a
        crash charges nothing twice. Tokens the provider reported also go to the observers
        (``input_tokens:<model>``), ``estimated`` ones do not. A failing store is logged: the answer is on its
        way."""
        deps, state = self.deps, self.state
        name = self.model_name(request)
        cost = cost_micros(deps.prices.get(name), input_tokens, output_tokens)
        if not estimated:
            deps.observe(f"input_tokens:{name}", state.id, input_tokens)
            deps.observe(f"output_tokens:{name}", state.id, output_tokens)
            if cost:
                deps.observe(f"cost_micros:{name}", state.id, cost)
        keys = [f"chat:{state.id}", f"model:{name}"]
        if self.asker is not None:
            keys.insert(0, f"user:{self.asker}")
        batch = state.options.get("batch_id")  # the same in every attempt at a queued batch; a run in this
        # process is never repeated, so it needs no charge id (the store would keep one a call for two days)
        try:
            await deps.usage.add(
                day=day_of(),
                keys=keys,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost=cost,
                charge=f"{batch}:{self.steps}" if batch else None,
            )
        except Exception:
            log.exception("could not count the usage of %s", state.id)

    async def _admit(self, updates: list[Log]) -> list[Log]:
        """The updates the model may see: an input over a limit is taken out of working memory (the model never
        reads it) and its author told once per window. Admin users pass."""
        limiter = self.deps.limiter
        if limiter is None:
            return updates
        admitted: list[Log] = []
        for entry in updates:
            if not isinstance(entry, InputRef):
                admitted.append(entry)
                continue
            text = entry.text if entry.text is not None else format_value(entry.data)
            refusal = await limiter.check(entry, conversation=self.state.id, text=text, usage=self.deps.usage)
            if refusal is None:
                admitted.append(entry)
                continue
            entry.processed = True
            logs = self.state.working_memory.logs
            if entry in logs:
                logs.remove(entry)
            self.deps.observe(f"limited:{refusal.kind.value}", self.state.id, 1.0)
            log.info("%s: an input of %s is over the %s limit", self.state.id, user_of(entry), refusal.kind.value)
            if await limiter.notice_due(refusal):
                await self._notify(refusal)
        return admitted

    async def _notify(self, refusal: Refusal) -> None:
        """Tell the user through the conversation's own output (in a queued run it follows the reply ledger)."""
        _, outputs = self.deps.available(self.state)
        own = [o for o in outputs if o.context is self.state.context] or outputs
        if not own:
            return
        self._notices += 1
        ref = OutputRef(type=own[0].type, content=refusal.notice, processed=True)
        try:
            await run_output(
                host=self.deps.host,
                state=self.state,
                output=own[0],
                ref=ref,
                slots=[],
                timeout=self.deps.output_timeout,
                step=self.steps,
                index=-self._notices,
            )
        except Exception as exc:
            log.warning("could not tell %s that a limit was reached: %s", self.state.id, exc)

    async def _step(self) -> None:
        deps, state = self.deps, self.state
        actions, outputs = deps.available(state)
        pending = state.working_memory.unprocessed()
        updates = await self._admit(pending)
        if pending and not updates:
            return  # every new input was over a limit: the model is not called
        persona = escape_persona(state.chat.persona) if state.chat.persona else deps.persona
        if deps.compact_prompt:
            actions = []
            prompt = build_compact_prompt(state=state, outputs=outputs, updates=updates, persona=persona)
        else:
            prompt = build_prompt(
                state=state,
                actions=actions,
                outputs=outputs,
                updates=updates,
                template=deps.prompt,
                persona=persona,
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
            metadata={"context_id": state.id},
            model=state.chat.model,
            images=self._images(prompt.prompt) if deps.sees_images else (),
            plain=deps.compact_prompt,
            turns=prompt.turns,
            stop=TURN_STOPS if deps.compact_prompt else ("</response>",),
        )
        parser = StreamParser()
        started = time.perf_counter()
        failure: Exception | None = None
        async with asyncio.TaskGroup() as tg:  # action tasks never raise: they report errors as results
            step = _Step(
                {a.name: a for a in actions},
                {o.type: o for o in outputs},
                tg,
                guarded=request.plain,
                speakers=prompt.speakers,
            )
            if request.plain:
                chunks: AsyncIterator[str] = _as_response(
                    self._stream(request), outputs[0].type if outputs else "", step
                )
            else:
                chunks = self._stream(request)
            try:
                async for chunk in chunks:
                    for event in parser.feed(chunk):
                        await self._on_event(event, step)
                for event in parser.close():
                    await self._on_event(event, step)
            except Exception as exc:  # raised after the calls already started have finished
                failure = exc
            finally:
                step.slots.close()  # no call can follow: a reference nothing writes stops waiting
        if failure is not None:
            raise failure
        deps.observe_model(state.id, time.perf_counter() - started)
        stray = "".join(step.stray_text).strip()
        if step.produced == 0 and stray:
            self._error(
                "your answer was plain text outside of any tag, so nobody received it; write it inside "
                f'<output type="{outputs[0].type if outputs else "OUTPUT_TYPE"}">...</output> within <response>',
                source="parser",
            )

    def _images(self, prompt: str) -> tuple[ImagePart, ...]:
        """The images this run fetched that the prompt shows (an input may have left the window)."""
        images = []
        for loaded in self.state.media.values():
            if loaded.data is None:
                continue
            marker = image_marker(loaded.attachment)
            if marker in prompt:
                images.append(ImagePart(marker=marker, mime=loaded.attachment.mime or "image/jpeg", data=loaded.data))
        return tuple(images)

    def _error(self, message: str, *, source: str) -> None:
        self._log(ErrorLog(message=message, source=source))

    async def _on_event(self, event: object, step: _Step) -> None:
        if isinstance(event, TagText):
            if event.name == "reasoning":
                self.emitter.emit(RunEventType.REASONING, event.text)
            elif event.name == "output":
                guard = step.guards.get(event.index)
                text = guard.feed(event.text) if guard is not None else event.text
                stream = step.streams.get(event.index)
                if stream is None and "{" in text:  # a template may start here: resolve it before it is shown
                    stream = step.streams[event.index] = output_stream(step.slots, self.state)
                if text and stream is not None:
                    text = await stream.feed(text)
                if text:
                    self.emitter.emit(
                        RunEventType.OUTPUT_TEXT,
                        text,
                        output_type=step.output_types.get(event.index),
                        output_index=event.index,
                    )
            return
        if isinstance(event, TagStart):
            if event.name == "output":
                step.output_types[event.index] = event.attrs.get("type") or event.attrs.get("name") or ""
                if step.guarded:
                    step.guards[event.index] = TurnGuard(step.speakers)
            return
        if isinstance(event, Text):
            step.stray_text.append(event.text)
            return
        if not isinstance(event, TagEnd):
            return
        if event.name == "reasoning":
            if event.content.strip():
                self._log(Thought(content=event.content.strip(), processed=True))
        elif event.name == "action_call":
            step.produced += 1
            self._start_call(event, step)
        elif event.name == "output":
            step.produced += 1
            await self._output(event, step)

    def _start_call(self, event: TagEnd, step: _Step) -> None:
        name = event.attrs.get("name", "")
        params = {k: v for k, v in event.attrs.items() if k != "name"}
        call = ActionCall(name=name, content=event.content, params=params, processed=True)
        self._log(call)
        index = len(step.slots)
        slot = CallSlot(name)
        step.slots.append(slot)
        action = step.actions.get(name)
        if action is not None:
            slot.targets = declared_targets(action.schema, event.content)
        self.emitter.emit(RunEventType.TOOL_CALL, {"id": call.id, "name": name, "arguments": event.content.strip()})
        if action is None:
            available = ", ".join(sorted(step.actions)) or "none"
            message = (
                f"unknown action {name!r}; available actions: {available}"
                if name
                else f'<action_call> needs a name attribute: <action_call name="..."> (available: {available})'
            )
            self._finish_call(call, slot, error=message)
            return
        step.tasks.create_task(self._call(action, call, slot, step, index))

    async def _call(self, action: Action, call: ActionCall, slot: CallSlot, step: _Step, index: int) -> None:
        try:
            result, text, attachments = await run_action(
                host=self.deps.host,
                tasks=self.deps.tasks,
                state=self.state,
                action=action,
                call=call,
                slots=step.slots,
                index=index,
            )
        except RunError as exc:
            self._finish_call(call, slot, error=str(exc))
        except Exception as exc:  # a bug in our own code must not block the context either
            log.exception("action %s failed inside the framework", action.name)
            self._finish_call(call, slot, error=f"internal error: {type(exc).__name__}: {exc}")
        else:
            slot.set(result)
            self._finish_call(call, slot, result=result, text=text, attachments=attachments)

    def _finish_call(
        self,
        call: ActionCall,
        slot: CallSlot,
        *,
        result: Any = None,
        text: str | None = None,
        error: str | None = None,
        attachments: list[Attachment] | None = None,
    ) -> None:
        if error is not None:
            slot.fail(error)
        entry = ActionResult(
            call_id=call.id, name=call.name, data=result, error=error, text=text, attachments=attachments or []
        )
        self._log(entry)
        content = {"id": call.id, "name": call.name}
        content.update({"error": error} if error is not None else {"result": result})
        self.emitter.emit(RunEventType.TOOL_CALL_RESULT, content)

    async def _output(self, event: TagEnd, step: _Step) -> None:
        attrs = dict(event.attrs)
        type_ = attrs.pop("type", None) or attrs.pop("name", None) or ""
        attrs.pop("name", None)
        guard = step.guards.pop(event.index, None)
        rest = guard.close() if guard is not None else ""
        stream = step.streams.pop(event.index, None)
        if stream is not None:
            rest = await stream.feed(rest) + await stream.close()
        if rest:  # held back while it could have been the start of an invented turn
            self.emitter.emit(RunEventType.OUTPUT_TEXT, rest, output_type=type_, output_index=event.index)
        content = cut_turns(event.content, step.speakers) if guard is not None else event.content
        ref = OutputRef(type=type_, content=content.strip(), params=attrs, processed=True)
        self._log(ref)
        output = step.outputs.get(type_)
        if output is None:
            available = ", ".join(sorted(step.outputs)) or "none"
            ref.error = f"unknown output type {type_!r}; available outputs: {available}"
            self._error(ref.error, source="output")
            self.emitter.emit(RunEventType.OUTPUT_TEXT, None, output_index=event.index, final=True, error=ref.error)
            return
        try:
            await run_output(
                host=self.deps.host,
                state=self.state,
                output=output,
                ref=ref,
                slots=step.slots,
                timeout=self.deps.output_timeout,
                step=self.steps,
                index=event.index,
            )
        except Exception as exc:
            if not isinstance(exc, RunError):
                log.warning("output %s handler raised", type_, exc_info=True)
            ref.error = str(exc) or type(exc).__name__
            self._error(f"output {type_!r} was not delivered: {ref.error}", source=f"output:{type_}")
            self.emitter.emit(
                RunEventType.OUTPUT_TEXT, None, output_type=type_, output_index=event.index, final=True, error=ref.error
            )
            return
        self.deps.observe_output(self.state.id, type_)
        if not self._replied and self._first_input_ms is not None:
            self._replied = True
            self.deps.observe("reply_seconds", self.state.id, max(0, now_ms() - self._first_input_ms) / 1000)
        self.emitter.emit(
            RunEventType.OUTPUT_TEXT,
            await delivered_text(ref.content, step.slots, self.state),
            output_type=type_,
            output_index=event.index,
            final=True,
        )
