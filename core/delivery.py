"""Output delivery: an output's log entry from the moment its tag opens, its text streamed as run events
(turns a small model invents cut off, templates resolved, a repeated reply held back), and, once the tag closes,
its handler run and the outcome logged. What the model got wrong (an unknown type, content or attributes that
break their schema, a template that does not resolve) is an error it reads; a handler that fails, after its
retries (``output(retry=...)``), is handled here, as the Outputs seed has it: logged and marked on the output's
log entry, without another model call, unless the output asks for it (``output(errors_to_model=True)``)."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from .dataflow import CallSlot
from .definitions import ContextState, Output, OutputContext
from .entries import OutputRef, OutputRefResponse
from .errors import ActionError, DispatchError, RunError
from .events import RunEventType
from .parser import TagEnd, TagStart, TagText
from .plugin import OutputGate
from .prompt import format_value
from .step import OpenOutput, Step
from .templates import call_scope, delivered_text, output_stream, resolve
from .turns import TurnGuard, cut_turns

if TYPE_CHECKING:
    from .definition_types import Host
    from .run_surface import RunSurface
    from .templates import TemplateStream

__all__ = ("abandon_outputs", "close_output", "open_output", "output_text", "post_text")

log = logging.getLogger("core.engine")

_handling: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("handling", default=frozenset())
"""The outputs whose handlers are running in this task: ``agent.say`` from one of them posts through another
(a bot's output that shows something through the platform's reply), never through itself again."""


def open_output(run: RunSurface, step: Step, event: TagStart) -> None:
    """The tag of an output opened: its log entry goes into working memory now, and grows as it streams."""
    attrs = dict(event.attrs)
    type_ = attrs.pop("type", None) or attrs.pop("name", None) or ""
    attrs.pop("name", None)
    ref = OutputRef(type=type_, params=attrs, processed=True)
    run.record(ref)
    step.open[event.index] = OpenOutput(ref, turns=TurnGuard(step.speakers) if step.guarded else None)


def output_text(run: RunSurface, step: Step, event: TagText) -> Coroutine[Any, Any, None] | None:
    """A piece of an output's text: added to its log entry and streamed to the listeners. Returns what to await
    when the text has templates to resolve first (a plain delta costs no coroutine)."""
    out = step.open.get(event.index)
    if out is None:
        return None
    # the entry's text so far, written past pydantic's __setattr__ (which would cost as much as the rest of the
    # delta); the tag's close assigns the whole content
    out.ref.__dict__["content"] += event.text
    text = out.turns.feed(event.text) if out.turns is not None else event.text
    if out.templates is None and "{" in text:  # a template may start here: resolve it before it is shown
        out.templates = output_stream(step.calls, run.state)
    if not text:
        return None
    if out.templates is not None:
        return _resolved(run, out, out.templates, text, event.index)
    if out.checked:
        run.emitter.emit(RunEventType.OUTPUT_TEXT, text, output_type=out.ref.type, output_index=event.index)
    else:
        _show(run, out, text, event.index)
    return None


async def _resolved(run: RunSurface, out: OpenOutput, templates: TemplateStream, text: str, index: int) -> None:
    text = await templates.feed(text)
    if text:
        _show(run, out, text, index)


def _show(run: RunSurface, out: OpenOutput, text: str, index: int, *, final: bool = False) -> None:
    """Stream ``text`` unless, with what came before it, it may still be a reply already delivered (then it is
    held until the text differs, or the output closes)."""
    if not out.checked:
        holds = run.hooks.holds  # (the loop guard: a reply already delivered)
        if not holds:
            out.checked = True
        else:
            out.held.append(text)
            shown = "".join(out.held)
            if not final:
                for hold in holds:
                    if hold(out.ref.type, shown):
                        return
            out.checked = True
            text = shown
            out.held.clear()
    if text:
        run.emitter.emit(RunEventType.OUTPUT_TEXT, text, output_type=out.ref.type, output_index=index)


async def close_output(run: RunSurface, step: Step, event: TagEnd) -> None:
    """The tag of an output closed: validate it, refuse a repeat, run its handler, tell the listeners."""
    out = step.open.pop(event.index, None)
    if out is None:  # the parser opens every tag it closes; this is a safety net
        open_output(run, step, TagStart(name=event.name, attrs=event.attrs, index=event.index))
        out = step.open.pop(event.index)
    ref, type_ = out.ref, out.ref.type
    rest = out.turns.close() if out.turns is not None else ""
    if out.templates is not None:
        rest = await out.templates.feed(rest) + await out.templates.close()
    content = cut_turns(event.content, step.speakers) if out.turns is not None else event.content
    ref.content = content.strip()
    output = step.outputs.get(type_)
    if output is None:
        if rest:
            _show(run, out, rest, event.index, final=True)
        available = ", ".join(sorted(step.outputs)) or "none"
        ref.error = f"unknown output type {type_!r}; available outputs: {available}"
        run.error(ref.error, source="output")
        run.emitter.emit(RunEventType.OUTPUT_TEXT_DONE, None, output_index=event.index, error=ref.error)
        return
    try:
        text = ref.content  # already stripped; templates resolved only where there are any
        if "{{" in text:
            text = await delivered_text(text, step.calls, run.state)
        refused = _vetted(run, type_, text) if run.hooks.vet else None
        if refused is not None:
            if refused.repeat:  # (the loop guard: a step of nothing but repeats ends the run)
                step.repeats += 1
            ref.error = refused.error
            run.error(refused.error or "", source=f"output:{type_}")
            run.emitter.emit(
                RunEventType.OUTPUT_TEXT_DONE, None, output_type=type_, output_index=event.index, error=ref.error
            )
            return
        if rest or out.held:
            _show(run, out, rest, event.index, final=True)
        data, attributes = await check_output(state=run.state, output=output, ref=ref, slots=step.calls)
    except DispatchError:
        raise  # the queue's storage failed (Redis, a lost lease): the run fails whole, not this output alone
    except Exception as exc:  # what the model wrote: it reads why, and writes it again
        _undelivered(run, ref, event.index, exc, tell_model=True)
        return
    try:
        added = await handle_output(
            host=run.deps.host,
            state=run.state,
            output=output,
            ref=ref,
            data=data,
            attributes=attributes,
            timeout=run.deps.output_timeout,
            step=run.steps,
            index=event.index,
        )
    except DispatchError:
        raise
    except Exception as exc:  # the handler's failure, after its retries: handled here unless the output says
        _undelivered(run, ref, event.index, exc, tell_model=output.errors_to_model)
        return
    for entry in added:
        run.record(entry)
    for delivered in run.hooks.delivered:
        delivered(type_, text)
    run.delivered(type_)
    run.emitter.emit(RunEventType.OUTPUT_TEXT_DONE, text, output_type=type_, output_index=event.index)


def _vetted(run: RunSurface, type_: str, text: str) -> OutputGate | None:
    """Ask the plugins' ``vet`` hooks about an output about to be delivered; the gate when one refused it."""
    gate = OutputGate(type=type_, text=text)
    for vet in run.hooks.vet:
        vet(gate)
        if gate.error is not None:
            return gate
    return None


def _undelivered(run: RunSurface, ref: OutputRef, index: int, exc: Exception, *, tell_model: bool) -> None:
    """An output that failed: its entry says why (working memory shows it), the listeners are told, and the model
    reads it as an error in its next step only when ``tell_model`` (otherwise the failure is logged)."""
    type_ = ref.type
    if not isinstance(exc, RunError):
        log.warning("output %s handler raised", type_, exc_info=exc)
    ref.error = str(exc) or type(exc).__name__
    if tell_model:
        run.error(f"output {type_!r} was not delivered: {ref.error}", source=f"output:{type_}")
    else:
        log.warning("%s: output %s was not delivered: %r", run.state.id, type_, ref.error)
    run.emitter.emit(RunEventType.OUTPUT_TEXT_DONE, None, output_type=type_, output_index=index, error=ref.error)


def abandon_outputs(step: Step) -> None:
    """The response broke off (the model failed) while outputs were open: their entries say they were not
    delivered. No event is sent for them: the run's ``error`` event follows, and listeners mark what they showed of
    them as cut."""
    for out in step.open.values():
        out.ref.error = "the answer broke off before this output was complete; it was not delivered"
    step.open.clear()


async def post_text(run: RunSurface, text: str, *, index: int, record: bool = False) -> None:
    """Post ``text`` as written through the conversation's own output, without the model (a limit's notice, a
    scheduled message); in a queued run it follows the reply ledger. ``index`` is a negative element index no
    response uses; ``record``: the post joins the conversation's working memory (the model sees it was said). The
    output's errors are raised."""
    _, available = run.deps.available(run.state)
    handling = _handling.get()
    outputs = [o for o in available if o.type not in handling]
    platform = run.state.context.laid_over or run.state.context  # the platform's reply, before a bot's outputs
    own = [o for o in outputs if o.context is platform] or outputs
    if not own:
        if handling:
            raise RunError(
                f"the handler of output {sorted(handling)[0]!r} has no other output to post through: "
                f"{run.state.id} is not on a platform (a bot's context is, under bots run APP or a platform's "
                "extension)"
            )
        return
    ref = OutputRef(type=own[0].type, content=text, processed=True)
    try:
        added = await run_output(
            host=run.deps.host,
            state=run.state,
            output=own[0],
            ref=ref,
            slots=[],
            timeout=run.deps.output_timeout,
            step=run.steps,
            index=index,
        )
    except Exception as exc:
        ref.error = str(exc) or type(exc).__name__
        raise
    finally:
        if record:
            run.record(ref)
    if record:
        for entry in added:
            run.record(entry)
        run.delivered(ref.type)
    # listeners see it was said (the terminal prints it; a platform's live replies have nothing of it to finish)
    run.emitter.emit(RunEventType.OUTPUT_TEXT_DONE, text, output_type=ref.type, output_index=index)


# -- an output's handler ---------------------------------------------------------------------------------------


async def run_output(
    *,
    host: Host,
    state: ContextState,
    output: Output,
    ref: OutputRef,
    slots: Sequence[CallSlot],
    timeout: float,
    step: int = 0,
    index: int = -1,
) -> list[OutputRef]:
    """Resolve templates, validate and run one output's handler (it receives ``host``), and apply what it
    returned to ``ref``; returns the further log entries it asked for (a list of ``OutputRefResponse``).
    Raises a ``RunError`` on failure (``check_output``, then ``handle_output``)."""
    data, attributes = await check_output(state=state, output=output, ref=ref, slots=slots)
    return await handle_output(
        host=host,
        state=state,
        output=output,
        ref=ref,
        data=data,
        attributes=attributes,
        timeout=timeout,
        step=step,
        index=index,
    )


async def check_output(
    *, state: ContextState, output: Output, ref: OutputRef, slots: Sequence[CallSlot]
) -> tuple[Any, Any]:
    """The model's part of an output: its templates resolved, its content and attributes validated. Returns
    ``(data, attributes)`` for the handler; raises a ``RunError`` (the model's to fix)."""
    content: Any = ref.content
    params: dict[str, Any] = dict(ref.params)
    if "{{" in content or any("{{" in v for v in params.values()):
        scope = await call_scope([content, params], slots, upto=len(slots), state=state)
        content = resolve(content, scope)
        params = resolve(params, scope)
        if not isinstance(content, str):
            content = format_value(content)
        params = {k: v if isinstance(v, str) else format_value(v) for k, v in params.items()}
        ref.params = params
    data = output.schema.validate_text(content) if isinstance(content, str) else output.schema.validate(content)
    if output.attributes is not None:
        attrs = output.attributes.validate(params)
        ref.params = {k: str(v) for k, v in params.items()}
        ctx_attrs: Any = attrs
    else:
        ctx_attrs = params
    ref.data = output.schema.dump(data)
    return data, ctx_attrs


async def handle_output(
    *,
    host: Host,
    state: ContextState,
    output: Output,
    ref: OutputRef,
    data: Any,
    attributes: Any,
    timeout: float,
    step: int = 0,
    index: int = -1,
) -> list[OutputRef]:
    """The handler's part of a checked output: run it (again, ``output.retry`` times, while it raises or times
    out) and apply what it returned to ``ref``; returns the further log entries it asked for. Raises what the last
    attempt raised (a timeout as an ``ActionError``)."""
    added: list[OutputRef] = []
    if output.handler is not None:
        ctx = OutputContext(state=state, output_ref=ref, agent=host, attributes=attributes, step=step, index=index)
        attempts = output.retry + 1
        handling = _handling.set(_handling.get() | {output.type})  # agent.say in it posts through another output
        try:
            for attempt in range(1, attempts + 1):
                try:
                    async with asyncio.timeout(timeout):
                        update = output.handler(data, ctx, host)
                        if inspect.isawaitable(update):  # a plain or an async handler
                            update = await update
                    break
                except TimeoutError as exc:
                    if attempt == attempts:
                        raise ActionError(f"output {output.type!r} handler timed out after {timeout:g}s") from exc
                except Exception:  # the author's code, or the platform behind it: anything can happen
                    if attempt == attempts:
                        raise
                log.info("output %s failed (attempt %d/%d): runs again", output.type, attempt, attempts, exc_info=True)
        finally:
            _handling.reset(handling)
        added = _apply(update, ref, output.type)
    if output.format is not None:
        for entry in (ref, *added):
            entry.text = output.format(entry)
    return added


_RESPONSE_KEYS = frozenset(("data", "params", "processed"))
"""The keys of a dict an output handler returns as a response (``OutputRefResponse``'s fields)."""


def _response(item: Any) -> OutputRefResponse | None:
    """``item`` as an ``OutputRefResponse``: one, or a dict with some of its fields and no other keys."""
    if isinstance(item, OutputRefResponse):
        return item
    if isinstance(item, dict) and item and _RESPONSE_KEYS.issuperset(item):
        params = item.get("params")
        processed = item.get("processed", True)
        return OutputRefResponse(
            data=item.get("data"),
            params=params if isinstance(params, dict) else None,
            processed=processed if isinstance(processed, bool) else True,
        )
    return None


def _apply(update: Any, ref: OutputRef, type_: str = "") -> list[OutputRef]:
    """Apply what an output handler returned to its log entry: an ``OutputRefResponse``, a list of them or of dicts
    with their fields (each after the first adds an entry of its own, returned), or a dict with
    ``data``/``params``/``processed``. A list that mixes responses with anything else is refused (``RunError``);
    anything else leaves the entry as it is."""
    if isinstance(update, OutputRefResponse):
        _update(ref, update)
        return []
    if isinstance(update, list) and update:
        responses = [_response(u) for u in update]
        if all(r is None for r in responses):
            return []  # not a response at all (the messages a platform sent, say): the entry stays as written
        wrong = [i for i, r in enumerate(responses) if r is None]
        if wrong:
            raise RunError(
                f"output {type_!r}: its handler returned a list whose item {wrong[0]} is "
                f"{type(update[wrong[0]]).__name__}, not a response: return a list of OutputRefResponse, or of "
                "dicts with only data, params and processed"
            )
        update = responses
    if isinstance(update, list) and update:
        _update(ref, update[0])
        added = []
        for more in update[1:]:
            entry = OutputRef(type=ref.type, params=dict(ref.params), data=ref.data, processed=True)
            _update(entry, more)
            added.append(entry)
        return added
    if isinstance(update, dict):
        if "data" in update:
            ref.data = update["data"]
        if "params" in update and isinstance(update["params"], dict):
            ref.params = {k: str(v) for k, v in update["params"].items()}
        if isinstance(update.get("processed"), bool):
            ref.processed = update["processed"]
    return []


def _update(ref: OutputRef, response: OutputRefResponse) -> None:
    if response.data is not None:
        ref.data = response.data
    if response.params is not None:
        ref.params = {k: str(v) for k, v in response.params.items()}
    ref.processed = response.processed
