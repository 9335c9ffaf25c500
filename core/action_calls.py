"""Action calls of a run: each starts as its tag closes and runs in the step's task group (the step waits for
it), is refused when it repeats a call that already succeeded (the loop guard), or, fire-and-forget, runs on in
the task runner once its arguments are valid, without anyone waiting for it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from . import tracing
from .dataflow import CallSlot
from .delivery import post_text
from .entries import ActionCall, ActionResult, InputRef
from .errors import RunError
from .events import RunEventType
from .handlers import CheckedCall, perform_action, prepare_action
from .parser import TagEnd
from .references import declared_targets
from .trace import correlation_id
from .trust import ApprovalRequest, AuditEvent, Tier, Verdict, address_of, audit
from .usage import user_of

if TYPE_CHECKING:
    from .definitions import Action
    from .engine import Run
    from .media.attachment import Attachment
    from .step import Step

__all__ = ("ask_approval", "refuse_call", "start_call")

log = logging.getLogger("core.engine")

NOTICE_INDEX = -1000
"""Refusal notices are posted at element indexes from here down (limits and schedules use -1, -2...)."""


def start_call(run: Run, step: Step, event: TagEnd) -> None:
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
    guard = run.guard
    if action is None and guard is not None and name in guard.hidden:
        refuse_call(run, step, call, slot, name, needed=guard.hidden[name].tier)
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
    if run.loop_guard.repeated_call(name, event.content, step=run.steps):
        step.repeats += 1
        _finish(
            run,
            call,
            slot,
            error=(
                f"{name!r} was already called with these arguments in this run and its result is above, so it was "
                "not run again; use that result instead of calling it again"
            ),
        )
        return
    if guard is not None and guard.verdict(action) is Verdict.APPROVE:
        step.tasks.create_task(ask_approval(run, action, call, slot, step, index))
        return
    step.tasks.create_task(_call(run, action, call, slot, step, index))


def _forgotten(checked: CheckedCall) -> bool:
    """True when nobody waits for this call: its action is fire-and-forget, or is so for a call that saves
    nothing and this one saves nothing."""
    mode = checked.action.fire_and_forget
    return mode is True or (mode == "without_output_path" and checked.target is None)


async def _call(run: Run, action: Action, call: ActionCall, slot: CallSlot, step: Step, index: int) -> None:
    with tracing.span(f"execute_tool {action.name}") if tracing.active() else tracing.NO_SPAN as span:
        if span.is_recording():
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": action.name})
            span.set_attribute("gen_ai.tool.call.id", call.id)
            if tracing.capture_content():
                span.set_attribute("gen_ai.tool.call.arguments", call.content)
        await _run_call(run, action, call, slot, step, index)
        if span.is_recording() and slot.error is not None:
            span.set_attribute("error.type", "action_error")


async def _run_call(run: Run, action: Action, call: ActionCall, slot: CallSlot, step: Step, index: int) -> None:
    deps = run.deps
    try:
        checked = await prepare_action(
            host=deps.host, state=run.state, action=action, call=call, slots=step.calls, index=index
        )
        if _forgotten(checked):
            slot.fail(f"{action.name!r} is not waited for (fire-and-forget): its result is not available")
            run.loop_guard.call_done(action.name, call.content, step=run.steps)
            deps.tasks.spawn(_unwaited(run, checked), name=f"action:{action.name}:{call.id}")
            return
        result, text, attachments = await perform_action(checked, host=deps.host, tasks=deps.tasks)
    except RunError as exc:
        _finish(run, call, slot, error=str(exc))
    except Exception as exc:  # a bug in our own code must not block the context either
        log.exception("action %s failed inside the framework", action.name)
        _finish(run, call, slot, error=f"internal error: {type(exc).__name__}: {exc}")
    else:
        slot.set(result)
        run.loop_guard.call_done(action.name, call.content, step=run.steps)
        _finish(run, call, slot, result=result, text=text, attachments=attachments)


async def _unwaited(run: Run, checked: CheckedCall) -> None:
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
    run: Run,
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


# -- trust: calls the run's tier may not make, and calls that wait for an approval (``core.trust``) -------------


def refuse_call(run: Run, step: Step, call: ActionCall, slot: CallSlot, name: str, *, needed: Tier | None) -> None:
    """A call of an action the run's tier may not call: it never runs; the model reads why, the call is audited,
    and the user is told once per action and run (in the chat's language)."""
    guard = run.guard
    assert guard is not None
    tier = guard.acting
    audit(
        run.deps.observe,
        AuditEvent.REFUSED,
        context_id=run.state.id,
        tier=tier,
        action=name,
        arguments=call.content,
        detail=f"needs {needed.value}" if needed is not None else "nobody may call it",
    )
    who = "nobody here" if needed is None else f"the {needed.value} tier or above"
    _finish(
        run,
        call,
        slot,
        error=(
            f"{name!r} was not run: it is reserved to {who}, and the person you are answering is {tier.value}; "
            "tell them you may not do this for them, and do not call it again"
        ),
    )
    if name not in guard.notified:
        guard.notified.add(name)
        text = guard.trust.notice(run.state.chat.language, name, tier, needed)
        step.tasks.create_task(_tell(run, text, index=NOTICE_INDEX - len(guard.notified)))


async def _tell(run: Run, text: str, *, index: int) -> None:
    try:
        await post_text(run, text, index=index)
    except Exception as exc:
        log.warning("%s: could not tell the user a call was refused: %s", run.state.id, exc)


async def ask_approval(run: Run, action: Action, call: ActionCall, slot: CallSlot, step: Step, index: int) -> None:
    """A call whose rule says ``approve``: its arguments are checked, then it is handed to the agent's approvals
    (``Trust.approvals``), whose answer is the result the model reads now; the call does not run in this run.
    Without approvals set up, it is refused."""
    guard = run.guard
    assert guard is not None
    approvals = guard.trust.approvals
    tier = guard.acting
    if approvals is None:
        audit(
            run.deps.observe,
            AuditEvent.REFUSED,
            context_id=run.state.id,
            tier=tier,
            action=action.name,
            arguments=call.content,
            detail="needs an approval, and no approvals are set up",
        )
        _finish(
            run,
            call,
            slot,
            error=(
                f"{action.name!r} was not run: it needs an approval by an admin, and approvals are not set up on "
                "this bot; tell the user it cannot be done here"
            ),
        )
        return
    deps = run.deps
    try:
        checked = await prepare_action(
            host=deps.host, state=run.state, action=action, call=call, slots=step.calls, index=index
        )
        asker = next((user_of(e) for e in reversed(run.chain) if isinstance(e, InputRef) and user_of(e)), None)
        request = ApprovalRequest(
            call_id=call.id,
            context_id=run.state.id,
            context_type=run.state.context.type,
            args=run.state.args,
            action=action.name,
            address=address_of(action),
            arguments=call.content,
            parsed=checked.copies if checked.instanced else checked.copies[0],
            tier=tier,
            user=asker,
            correlation_id=correlation_id.get(),
        )
        result = await approvals.request(request, state=run.state, host=deps.host)
    except RunError as exc:
        _finish(run, call, slot, error=str(exc))
    except Exception as exc:
        log.exception("asking an approval of %s failed inside the framework", action.name)
        _finish(run, call, slot, error=f"internal error: {type(exc).__name__}: {exc}")
    else:
        audit(
            run.deps.observe,
            AuditEvent.APPROVAL_REQUESTED,
            context_id=run.state.id,
            tier=tier,
            action=action.name,
            arguments=call.content,
        )
        run.loop_guard.call_done(action.name, call.content, step=run.steps)
        slot.set(result)
        _finish(run, call, slot, result=result)
