"""Action calls of a run: each starts as its tag closes and runs in the step's task group (the step waits for
it), is refused when it repeats a call that already succeeded (the loop guard), or, fire-and-forget, runs on in
the task runner once its arguments are valid, without anyone waiting for it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from . import tracing
from .dataflow import CallSlot
from .entries import ActionCall, ActionResult
from .errors import RunError
from .events import RunEventType
from .handlers import CheckedCall, perform_action, prepare_action
from .parser import TagEnd
from .plugin import CallGate
from .references import declared_targets

if TYPE_CHECKING:
    from .definitions import Action
    from .media.attachment import Attachment
    from .run_surface import RunSurface
    from .step import Step

__all__ = ("start_call",)

log = logging.getLogger("core.engine")


def start_call(run: RunSurface, step: Step, event: TagEnd) -> None:
    """The tag of a call closed: log it and start it (or refuse it, with an error result the model reads)."""
    name = event.attrs.get("name", "")
    params = {k: v for k, v in event.attrs.items() if k != "name"}
    call = ActionCall(name=name, content=event.content, params=params, processed=True)
    run.record(call)
    index = len(step.calls)
    slot = CallSlot(name)
    step.calls.append(slot)
    action = step.actions.get(name)
    if action is not None:
        slot.targets = declared_targets(action.schema, event.content)
    run.emitter.emit(RunEventType.TOOL_CALL, {"id": call.id, "name": name, "arguments": event.content.strip()})
    if action is None and run.hooks.gate and _gated(run, step, call, slot, name, None, index):
        return
    if action is None:
        available = ", ".join(sorted(step.actions)) or "none"
        message = (
            f"unknown action {name!r}; available actions: {available}"
            if name
            else f'<action_call> needs a name attribute: <action_call name="..."> (available: {available})'
        )
        _finish(run, call, slot, error=message)
        return
    if run.hooks.gate and _gated(run, step, call, slot, name, action, index):
        return
    step.tasks.create_task(_call(run, action, call, slot, step, index))


def _gated(
    run: RunSurface, step: Step, call: ActionCall, slot: CallSlot, name: str, action: Action | None, index: int
) -> bool:
    """Ask the plugins' ``gate`` hooks about a call (trust: refused, or handed to an approval); True when one
    decided, and the call is then finished with their outcome instead of running."""

    async def check() -> Any:
        assert action is not None
        checked = await prepare_action(
            host=run.deps.host, state=run.state, action=action, call=call, slots=step.calls, index=index
        )
        return checked.copies if checked.instanced else checked.copies[0]

    gate = CallGate(name=name, action=action, call=call, check=check)
    for decide in run.hooks.gate:
        decide(gate)
        if gate.done:
            break
    else:
        return False
    if gate.deferred is not None:
        step.tasks.create_task(_answered(run, call, slot, gate.deferred))
    else:
        if gate.repeat:  # (the loop guard: a step of nothing but repeats ends the run)
            step.repeats += 1
        _finish(run, call, slot, error=gate.error or f"{name!r} was not run")
    return True


async def _answered(run: RunSurface, call: ActionCall, slot: CallSlot, answer: Awaitable[Any]) -> None:
    """A call a plugin answers itself (an approval asked): what it gives is the result the model reads."""
    try:
        result = await answer
    except RunError as exc:
        _finish(run, call, slot, error=str(exc))
    except Exception as exc:
        log.exception("a plugin answering a call of %s failed", call.name)
        _finish(run, call, slot, error=f"internal error: {type(exc).__name__}: {exc}")
    else:
        for called in run.hooks.called:
            called(call)
        slot.set(result)
        _finish(run, call, slot, result=result)


def _forgotten(checked: CheckedCall) -> bool:
    """True when nobody waits for this call: its action is fire-and-forget, or is so for a call that saves
    nothing and this one saves nothing."""
    mode = checked.action.fire_and_forget
    return mode is True or (mode == "without_output_path" and checked.target is None)


async def _call(run: RunSurface, action: Action, call: ActionCall, slot: CallSlot, step: Step, index: int) -> None:
    with tracing.span(f"execute_tool {action.name}") if tracing.active() else tracing.NO_SPAN as span:
        if span.is_recording():
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": action.name})
            span.set_attribute("gen_ai.tool.call.id", call.id)
            if tracing.capture_content():
                span.set_attribute("gen_ai.tool.call.arguments", call.content)
        await _run_call(run, action, call, slot, step, index)
        if span.is_recording() and slot.error is not None:
            span.set_attribute("error.type", "action_error")


async def _run_call(run: RunSurface, action: Action, call: ActionCall, slot: CallSlot, step: Step, index: int) -> None:
    deps = run.deps
    try:
        checked = await prepare_action(
            host=deps.host, state=run.state, action=action, call=call, slots=step.calls, index=index
        )
        if _forgotten(checked):
            slot.fail(f"{action.name!r} is not waited for (fire-and-forget): its result is not available")
            for called in run.hooks.called:
                called(call)
            deps.tasks.spawn(_unwaited(run, checked), name=f"action:{action.name}:{call.id}")
            # its tool_call has a result all the same: that it runs on where nobody waits for it
            run.emitter.emit(
                RunEventType.TOOL_CALL_RESULT, {"id": call.id, "name": call.name, "result": None, "background": True}
            )
            return
        result, text, attachments = await perform_action(checked, host=deps.host, tasks=deps.tasks)
    except RunError as exc:
        _finish(run, call, slot, error=str(exc))
    except Exception as exc:  # a bug in our own code must not block the context either
        log.exception("action %s failed inside the framework", action.name)
        _finish(run, call, slot, error=f"internal error: {type(exc).__name__}: {exc}")
    else:
        slot.set(result)
        for called in run.hooks.called:
            called(call)
        _finish(run, call, slot, result=result, text=text, attachments=attachments)


async def _unwaited(run: RunSurface, checked: CheckedCall) -> None:
    """A fire-and-forget call's handler, run to its end in the task runner (the run may be over by then: its
    result is logged here, not shown to the model)."""
    name = checked.action.name
    try:
        await perform_action(checked, host=run.deps.host, tasks=run.deps.tasks)
    except RunError as exc:
        log.warning("%s: fire-and-forget call of %s failed: %s", run.state.id, name, exc)
    else:
        log.debug("%s: fire-and-forget call of %s done", run.state.id, name)


def _finish(
    run: RunSurface,
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
    run.record(entry)
    content = {"id": call.id, "name": call.name}
    content.update({"error": error} if error is not None else {"result": result})
    run.emitter.emit(RunEventType.TOOL_CALL_RESULT, content)
