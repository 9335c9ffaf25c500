"""Handlers: validate what the model wrote and run the author's code, turning every failure into a
message the model sees in its next step."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .definitions import Action, ActionContext, ContextState, Output, OutputContext, maybe_await
from .entries import ActionCall, OutputRef
from .errors import ActionError, TemplateError, ValidationError
from .media.attachment import Attachment
from .prompt import format_value
from .statelog import MARK, Method, find_refs, parse_path
from .templates import call_refs, resolve

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ("CallSlot", "parse_arguments", "run_action", "run_output")

log = logging.getLogger("core.handlers")


class CallSlot:
    """The future result of one action call within a response, for ``{{calls[n]}}`` templates."""

    __slots__ = ("error", "future", "name", "writes")

    def __init__(self, name: str) -> None:
        self.name = name
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.error: str | None = None
        self.writes: tuple[str, ...] | None = None
        """The state path this call will write (its ``_outputPath``), known when the call starts."""

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
) -> tuple[Any, str | None, list[Attachment]]:
    """Validate and run one call. Returns ``(result, text, attachments)`` (the pictures the handler showed
    with ``ctx.show_image``); raises a ``RunError`` the caller reports."""
    raw = parse_arguments(action, call.content)
    if call_refs(raw) or "{{" in call.content:
        scope = await _scope(raw, slots, upto=index, state=state)
        raw = resolve(raw, scope)
    method: Method = "set"
    if isinstance(raw, dict):
        given = raw.pop("_outputMethod", "set")
        if given not in ("set", "merge", "push"):
            raise ValidationError(f"_outputMethod must be set, merge or push, not {given!r}")
        method = given
        if not declares_output_path(action) and "_outputPath" in raw:
            raise ValidationError(
                f"action {action.name!r} takes no _outputPath: its result cannot be saved to the state"
            )
        raw = await _resolve_state_refs(raw, slots[:index], state)
    args = action.schema.validate(raw)
    call.data = action.schema.dump(args)
    output_path = _output_path(action, args)
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
    if output_path is not None:
        state.state_log.append(output_path, result, method=method, call={"name": action.name, "arguments": call.data})
        if text is None:
            text = f"{format_value(result)} (saved to {MARK}{'.'.join(output_path)})"
    return result, text, ctx.attachments


def declares_output_path(action: Action) -> bool:
    """True when the action's schema has an ``_outputPath`` property (a fixed or a flexible path)."""
    props = action.schema.json_schema.get("properties")
    return isinstance(props, dict) and "_outputPath" in props


def declared_output_path(action: Action, content: str) -> tuple[str, ...] | None:
    """The path a call will write, read before it runs (for calls later in the response that wait on it)."""
    if not declares_output_path(action):
        return None
    text: Any = None
    try:
        raw = json.loads(content) if content.strip() else {}
        text = raw.get("_outputPath") if isinstance(raw, dict) else None
    except json.JSONDecodeError:
        return None
    if text is None:
        prop = action.schema.json_schema["properties"]["_outputPath"]
        text = prop.get("const", prop.get("default"))
    try:
        return parse_path(text) if isinstance(text, str) else None
    except ValidationError:
        return None


def _output_path(action: Action, args: Any) -> tuple[str, ...] | None:
    if isinstance(args, dict):
        value = args.get("_outputPath")
    elif declares_output_path(action):
        value = action.schema.adapter.dump_python(args, by_alias=True).get("_outputPath")
    else:
        value = None
    return parse_path(value) if isinstance(value, str) and value else None


def _related(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


async def _resolve_state_refs(raw: dict[str, Any], earlier: Sequence[CallSlot], state: ContextState) -> Any:
    """Replace ``†path`` strings by their values; wait for earlier calls of this response that write them."""
    refs = list(find_refs(raw))
    if not refs:
        return raw
    for ref in refs:
        for slot in earlier:
            if slot.writes is not None and _related(slot.writes, ref):
                await slot.future
    values: dict[tuple[str, ...], Any] = {}
    for ref in refs:
        found, value = state.state_log.resolve(ref)
        if not found:
            raise TemplateError(
                f"{MARK}{'.'.join(ref)} has no value: nothing wrote it before, and no earlier call of this "
                "response writes it (use _outputPath on a call to write it first)"
            )
        values[ref] = value

    def swap(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(MARK):
            try:
                return values.get(parse_path(value), value)
            except ValidationError:
                return value
        if isinstance(value, dict):
            return {k: v if k == "_outputPath" else swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    return swap(raw)


async def run_output(
    *,
    agent: Agent,
    state: ContextState,
    output: Output,
    ref: OutputRef,
    slots: Sequence[CallSlot],
    timeout: float,
    step: int = 0,
    index: int = -1,
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
    ctx = OutputContext(state=state, output_ref=ref, agent=agent, attributes=ctx_attrs, step=step, index=index)
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
