"""Handlers: validate what the model wrote and run the author's code, turning every failure into a
message the model sees in its next step."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .definitions import Action, ActionContext, ContextState, Output, OutputContext, maybe_await
from .errors import ActionError, TemplateError, ValidationError
from .logs import ActionCall, OutputRef
from .prompt import format_value
from .templates import call_refs, resolve

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ("CallSlot", "parse_arguments", "run_action", "run_output")

log = logging.getLogger("core.handlers")


class CallSlot:
    """The future result of one action call within a response, for ``{{calls[n]}}`` templates."""

    __slots__ = ("error", "future", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.error: str | None = None

    def set(self, value: Any) -> None:
        if not self.future.done():
            self.future.set_result(value)

    def fail(self, message: str) -> None:
        self.error = message
        if not self.future.done():
            self.future.set_result(None)


async def _scope(value: Any, slots: Sequence[CallSlot], *, upto: int, state: ContextState) -> dict[str, Any]:
    """Wait for the calls ``value`` refers to, then return the template scope."""
    refs = call_refs(value)
    for n in sorted(refs):
        if n >= upto:
            raise TemplateError(
                f"{{{{calls[{n}]}}}} refers to a call that comes later or does not exist; "
                f"only calls[0]..calls[{upto - 1}] come before this point"
                if upto
                else f"{{{{calls[{n}]}}}} refers to a call, but no action was called before this point"
            )
        slot = slots[n]
        await slot.future
        if slot.error is not None:
            raise TemplateError(f"{{{{calls[{n}]}}}} ({slot.name}) failed: {slot.error}")
    results = [s.future.result() if s.future.done() and s.error is None else None for s in slots[:upto]]
    return {"calls": results, "memory": state.memory if state.memory is not None else {}}


def parse_arguments(action: Action, content: str) -> Any:
    """The JSON arguments of a call (an empty body means no arguments)."""
    text = content.strip()
    if action.schema.is_text:
        return content
    if not text:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"arguments of {action.name!r} are not valid JSON ({exc.msg} at column {exc.colno}); "
            "write a JSON object that matches the action's schema"
        ) from exc


async def run_action(
    *,
    agent: Agent,
    state: ContextState,
    action: Action,
    call: ActionCall,
    slots: Sequence[CallSlot],
    index: int,
) -> tuple[Any, str | None]:
    """Validate and run one call. Returns ``(result, text)``; raises a ``RunError`` the caller reports."""
    raw = parse_arguments(action, call.content)
    if call_refs(raw) or "{{" in call.content:
        scope = await _scope(raw, slots, upto=index, state=state)
        raw = resolve(raw, scope)
    args = action.schema.validate(raw)
    call.data = action.schema.dump(args)
    ctx = ActionContext(state=state, call=call, agent=agent)

    async def invoke() -> Any:
        attempts = action.retry + 1
        for attempt in range(attempts):
            try:
                async with asyncio.timeout(action.timeout):
                    return await maybe_await(action.handler(args, ctx, agent))
            except TimeoutError as exc:
                err: Exception = ActionError(f"{action.name!r} timed out after {action.timeout:g}s")
                err.__cause__ = exc
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the author's code: anything can happen
                log.debug("action %s failed (attempt %d/%d)", action.name, attempt + 1, attempts, exc_info=True)
                err = exc
            if attempt + 1 == attempts:
                if action.on_error is not None:
                    replacement = await maybe_await(action.on_error(err, ctx, agent))
                    if replacement is not None:
                        return replacement
                if isinstance(err, ActionError):
                    raise err
                raise ActionError(f"{action.name!r} raised {type(err).__name__}: {err}") from err
        raise AssertionError("unreachable")

    result = await agent.tasks.run(invoke, queue=action.queue, key=f"action:{action.name}", limit=action.concurrency)
    if action.returns is not None:
        try:
            result = action.returns.validate(result)
        except ValidationError as exc:
            raise ActionError(f"{action.name!r} returned a value that breaks its returns schema: {exc}") from exc
        result = action.returns.dump(result)
    elif hasattr(result, "model_dump"):
        result = result.model_dump(mode="json")
    text = action.format(result) if action.format is not None else None
    return result, text


async def run_output(
    *,
    agent: Agent,
    state: ContextState,
    output: Output,
    ref: OutputRef,
    slots: Sequence[CallSlot],
    timeout: float,
) -> None:
    """Resolve templates, validate and run one output's handler; raises a ``RunError`` on failure."""
    content: Any = ref.content
    params: dict[str, Any] = dict(ref.params)
    if "{{" in content or any("{{" in v for v in params.values()):
        scope = await _scope([content, params], slots, upto=len(slots), state=state)
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
    if output.handler is None:
        return
    ctx = OutputContext(state=state, output_ref=ref, agent=agent, attributes=ctx_attrs)
    try:
        async with asyncio.timeout(timeout):
            update = await maybe_await(output.handler(data, ctx, agent))
    except TimeoutError as exc:
        raise ActionError(f"output {output.type!r} handler timed out after {timeout:g}s") from exc
    if isinstance(update, dict):
        if "data" in update:
            ref.data = update["data"]
        if "params" in update and isinstance(update["params"], dict):
            ref.params = {k: str(v) for k, v in update["params"].items()}
    if output.format is not None:
        ref.text = output.format(ref)
