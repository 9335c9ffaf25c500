"""Action handlers: validate the arguments the model wrote and run the author's code, turning every failure into a
message the model sees in its next step (an output's handler is run where the output is delivered,
``core.delivery``)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .call_format import xml_arguments
from .dataflow import CallSlot, run_instances
from .definitions import Action, ActionContext, ContextState, maybe_await
from .entries import ActionCall
from .errors import ActionError, RunError, ValidationError
from .media.attachment import Attachment
from .prompt import format_value
from .references import Target, declared_targets, output_target, prepare_call, save_result, saved_note
from .templates import call_refs, call_scope, resolve

if TYPE_CHECKING:
    from .definition_types import Host
    from .task_runner import TaskRunner

__all__ = (
    "CheckedCall",
    "parse_arguments",
    "perform_action",
    "prepare_action",
)

log = logging.getLogger("core.handlers")


def parse_arguments(action: Action, content: str) -> Any:
    """The JSON arguments of a call (an empty body means no arguments), or its XML ones (``call_format``)."""
    text = content.strip()
    if action.schema.is_text:
        return content
    if action.call_format == "xml":
        return xml_arguments(action.name, content, action.schema)
    if not text:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"arguments of {action.name!r} are not valid JSON ({exc.msg} at column {exc.colno}); "
            "write a JSON object that matches the action's schema"
        ) from exc


@dataclass(kw_only=True, slots=True)
class CheckedCall:
    """A call whose arguments are resolved and validated: what is left is to run its handler."""

    action: Action
    """The action called."""
    copies: list[Any]
    """The validated arguments, one per copy (one unless the call is instanced)."""
    instanced: bool
    """The call runs as copies (``_instances``)."""
    target: Target | None
    """Where its result is saved in the state log, if anywhere (of an instanced call: the list of every copy's
    result, unless its copies name paths of their own)."""
    own_targets: list[Target | None] | None = None
    """Of an instanced call whose copies name output paths of their own: where each copy's result is saved."""
    ctx: ActionContext
    """What the handler receives as ``ctx``."""


async def prepare_action(
    *,
    host: Host,
    state: ContextState,
    action: Action,
    call: ActionCall,
    slots: Sequence[CallSlot],
    index: int,
) -> CheckedCall:
    """Parse, resolve (templates and references, waiting for the calls they read) and validate one call's
    arguments; raises a ``RunError`` the caller reports."""
    raw = parse_arguments(action, call.content)
    mine = slots[index] if index < len(slots) else None
    if mine is not None and not mine.targets:
        mine.targets = declared_targets(action.schema, call.content)
    if call_refs(raw) or "{{" in call.content:
        scope = await call_scope(raw, slots, upto=index, state=state, me=mine)
        raw = resolve(raw, scope)
    prepared = await prepare_call(
        action.name,
        action.schema,
        raw,
        calls=slots,
        index=index,
        log=state.state_log,
        wait_for_input=action.wait_for_input,
    )
    copies = [action.schema.validate(r) for r in prepared.copies]
    dumped = [action.schema.dump(a) for a in copies]
    call.data = dumped if prepared.instanced else dumped[0]
    targets = [output_target(action.schema, prepared, d, copy=i) for i, d in enumerate(dumped)]
    own = prepared.instanced and any(t != targets[0] for t in targets)
    return CheckedCall(
        action=action,
        copies=copies,
        instanced=prepared.instanced,
        target=None if own else targets[0],
        own_targets=targets if own else None,
        ctx=ActionContext(state=state, call=call, agent=host),
    )


async def perform_action(
    prepared: CheckedCall, *, host: Host, tasks: TaskRunner
) -> tuple[Any, str | None, list[Attachment]]:
    """Run a prepared call's handler in ``tasks`` (it receives ``host``) and save its result where its output
    path says. Returns ``(result, text, attachments)`` (the pictures the handler showed with
    ``ctx.show_image``); raises a ``RunError`` the caller reports."""
    action, ctx = prepared.action, prepared.ctx
    state, call = ctx.state, ctx.call

    async def invoke(args: Any, ctx: ActionContext) -> Any:
        attempts = action.retry + 1
        for attempt in range(attempts):
            try:
                async with asyncio.timeout(action.timeout):
                    return await maybe_await(action.handler(args, ctx, host))
            except TimeoutError as exc:
                err: Exception = ActionError(f"{action.name!r} timed out after {action.timeout:g}s")
                err.__cause__ = exc
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the author's code: anything can happen
                # the last attempt of a bug in the author's code is a warning, as an output handler's is; an ActionError
                # it raised on purpose is an answer for the model, and an attempt left to retry is not a failure yet
                bug = attempt + 1 == attempts and not isinstance(exc, RunError)
                level = logging.WARNING if bug else logging.DEBUG
                log.log(level, "action %s raised (attempt %d/%d)", action.name, attempt + 1, attempts, exc_info=True)
                err = exc
            if attempt + 1 == attempts:
                if action.on_error is not None:
                    replacement = await maybe_await(action.on_error(err, ctx, host))
                    if replacement is not None:
                        return replacement
                if isinstance(err, ActionError):
                    raise err
                raise ActionError(f"{action.name!r} raised {type(err).__name__}: {err}") from err
        raise AssertionError("unreachable")

    async def run_one(args: Any, ctx: ActionContext) -> Any:
        job = functools.partial(invoke, args, ctx)
        result = await tasks.run(job, queue=action.queue, key=f"action:{action.name}", limit=action.concurrency)
        if action.returns is not None:
            try:
                result = action.returns.validate(result)
            except ValidationError as exc:
                raise ActionError(f"{action.name!r} returned a value that breaks its returns schema: {exc}") from exc
            return action.returns.dump(result)
        return result.model_dump(mode="json") if hasattr(result, "model_dump") else result

    if prepared.instanced:
        result, text = await _run_copies(action, prepared.copies, run_one, ctx, prepared.own_targets)
    else:
        result = await run_one(prepared.copies[0], ctx)
        text = action.format(result) if action.format is not None else None
    if prepared.target is not None:
        paths = save_result(
            state.state_log, prepared.target, result, call={"name": action.name, "arguments": call.data}
        )
        if text is None:
            text = f"{format_value(result)} {saved_note(paths)}"
        elif prepared.instanced:
            text = f"{text}\n{saved_note(paths)}"
    return result, text, ctx.attachments


async def _run_copies(
    action: Action,
    copies: Sequence[Any],
    run_one: Callable[[Any, ActionContext], Awaitable[Any]],
    ctx: ActionContext,
    targets: Sequence[Target | None] | None,
) -> tuple[list[Any], str | None]:
    """Run an instanced call's copies in parallel, each in its own workspace, each saving its result where its own
    output path says (``targets``, if they have paths of their own); the result is the list of the copies'
    results in order (``{"error": ...}`` for a copy that failed)."""
    contexts = [ActionContext(state=ctx.state, call=ctx.call, agent=ctx.agent) for _ in copies]
    saved: list[str] = [""] * len(copies)

    async def one(i: int, args: Any) -> Any:
        result = await run_one(args, contexts[i])
        target = targets[i] if targets is not None else None
        if target is not None:  # inside the copy's workspace: gathered with its other writes
            arguments = action.schema.dump(args)
            paths = save_result(ctx.state.state_log, target, result, call={"name": action.name, "arguments": arguments})
            saved[i] = f" {saved_note(paths)}"
        return result

    outcomes, notes = await run_instances(copies, one, ctx.state.state_log)
    for each in contexts:
        ctx.attachments.extend(each.attachments)
    if all(error is not None for _, error in outcomes):
        errors = "; ".join(f"copy {i}: {error}" for i, (_, error) in enumerate(outcomes))
        raise ActionError(f"every copy of {action.name!r} failed: {errors}")
    results = [result if error is None else {"error": error} for result, error in outcomes]
    if action.format is None and not notes and not any(saved):
        return results, None
    lines = [
        f"[{i}] {_shown(action, result) if error is None else f'error: {error}'}{saved[i]}"
        for i, (result, error) in enumerate(outcomes)
    ]
    return results, "\n".join([*lines, *notes])


def _shown(action: Action, result: Any) -> str:
    return action.format(result) if action.format is not None else format_value(result)
