"""Definitions a bot author writes: actions, outputs, inputs, contexts, extensions and services.

Each is a keyword-only dataclass built by a helper of the same name (``action(...)``, ``output(...)``),
which checks it at once so a mistake is a ``DefinitionError`` at import time, not a crash mid-run.

The definitions are generic in their schemas, and the helpers infer them from the pydantic model or type given
as ``schema`` (as the TypeScript API infers them from zod): ``action(schema=Weather, handler=h)`` is an
``Action[Weather]``, and mypy checks that ``h`` takes a ``Weather``, that a ``key`` lambda reads fields ``Args``
has, that an output's handler takes ``str`` content when no schema is given and returns what the engine applies
to the output's log entry (``OutputResult``: None, an ``OutputRefResponse``, a list of them or a dict, never an
``int`` the engine would drop). The agent a handler or hook receives is typed ``Host`` (``core.host``); a handler
may annotate it ``Host`` or ``Agent`` (the helpers accept any type of ``Host``, and the agent is the one there is).
An ``install``, a service and an input's ``subscribe`` receive it as a ``Setup`` (a ``Host`` that also registers).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, overload

from .call_format import CallFormat
from .definition_types import (
    A,
    Action,
    AnyAction,
    AnyOutput,
    Context,
    ContextUse,
    Extension,
    H,
    Input,
    Output,
    OutputResult,
    PlatformChat,
    S,
    Send,
    Service,
    maybe_await,
)
from .entries import InputRef, OutputRef
from .errors import DefinitionError, ValidationError
from .handler_context import ActionContext, ContextState, InputContext, OutputContext
from .schema import Schema, as_schema

if TYPE_CHECKING:
    from typing import _SpecialForm

    from .definition_types import Setup

__all__ = (
    "Action",
    "ActionContext",
    "Context",
    "ContextState",
    "ContextUse",
    "Extension",
    "Input",
    "InputContext",
    "Output",
    "OutputContext",
    "OutputResult",
    "PlatformChat",
    "Send",
    "Service",
    "action",
    "context",
    "extension",
    "input",
    "maybe_await",
    "output",
    "service",
)

_NAME = re.compile(r"^[A-Za-z_][\w:.\-]*$")


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise DefinitionError(
            f"{what} {value!r} is not a valid name: use letters, digits, '_', ':', '.' or '-', starting with a letter"
        )


def _check_callable(value: Any, what: str) -> None:
    if value is not None and not callable(value):
        raise DefinitionError(f"{what} must be callable, got {type(value).__name__}")


@overload
def action(
    *,
    name: str,
    handler: Callable[[dict[str, Any], ActionContext, H], Any],
    description: str = "",
    instructions: str = "",
    returns: Any = None,
    examples: Sequence[str] = (),
    call_format: CallFormat = "json",
    enabled: Callable[[ContextState], bool] | None = None,
    install: Callable[[Setup], Any] | None = None,
    context: Context[Any] | None = None,
    retry: int = 0,
    queue: str = "main",
    concurrency: int | None = None,
    timeout: float = 60.0,
    format: Callable[[Any], str] | None = None,
    on_error: Callable[[Exception, ActionContext, H], Any] | None = None,
    fire_and_forget: bool | Literal["without_output_path"] = False,
    wait_for_input: float = 0.0,
    address: str | None = None,
) -> Action[dict[str, Any]]: ...
@overload
def action(
    *,
    name: str,
    handler: Callable[[S, ActionContext, H], Any],
    description: str = "",
    instructions: str = "",
    schema: type[S] | Schema[S],
    returns: Any = None,
    examples: Sequence[str] = (),
    call_format: CallFormat = "json",
    enabled: Callable[[ContextState], bool] | None = None,
    install: Callable[[Setup], Any] | None = None,
    context: Context[Any] | None = None,
    retry: int = 0,
    queue: str = "main",
    concurrency: int | None = None,
    timeout: float = 60.0,
    format: Callable[[Any], str] | None = None,
    on_error: Callable[[Exception, ActionContext, H], Any] | None = None,
    fire_and_forget: bool | Literal["without_output_path"] = False,
    wait_for_input: float = 0.0,
    address: str | None = None,
) -> Action[S]: ...
@overload
def action(
    *,
    name: str,
    handler: Callable[[Any, ActionContext, H], Any],
    description: str = "",
    instructions: str = "",
    schema: UnionType | _SpecialForm,
    returns: Any = None,
    examples: Sequence[str] = (),
    call_format: CallFormat = "json",
    enabled: Callable[[ContextState], bool] | None = None,
    install: Callable[[Setup], Any] | None = None,
    context: Context[Any] | None = None,
    retry: int = 0,
    queue: str = "main",
    concurrency: int | None = None,
    timeout: float = 60.0,
    format: Callable[[Any], str] | None = None,
    on_error: Callable[[Exception, ActionContext, H], Any] | None = None,
    fire_and_forget: bool | Literal["without_output_path"] = False,
    wait_for_input: float = 0.0,
    address: str | None = None,
) -> Action[Any]: ...
def action(
    *,
    name: str,
    handler: Callable[[Any, ActionContext, Any], Any],
    description: str = "",
    instructions: str = "",
    schema: Any = None,
    returns: Any = None,
    examples: Sequence[str] = (),
    call_format: CallFormat = "json",
    enabled: Callable[[ContextState], bool] | None = None,
    install: Callable[[Any], Any] | None = None,
    context: Context[Any] | None = None,
    retry: int = 0,
    queue: str = "main",
    concurrency: int | None = None,
    timeout: float = 60.0,
    format: Callable[[Any], str] | None = None,
    on_error: Callable[[Exception, ActionContext, Any], Any] | None = None,
    fire_and_forget: bool | Literal["without_output_path"] = False,
    wait_for_input: float = 0.0,
    address: str | None = None,
) -> Action[Any]:
    """Define an action; ``schema`` is a pydantic model or type for the arguments (default: no arguments, a
    dict), and the handler takes what it validates (mypy checks it)."""
    _check_name(name, "action name")
    _check_callable(handler, f"action {name!r}: handler")
    if handler is None:
        raise DefinitionError(f"action {name!r} needs a handler")
    for attr, fn in (("enabled", enabled), ("install", install), ("format", format), ("on_error", on_error)):
        _check_callable(fn, f"action {name!r}: {attr}")
    if retry < 0 or timeout <= 0 or (concurrency is not None and concurrency < 1):
        raise DefinitionError(f"action {name!r}: retry >= 0, timeout > 0 and concurrency >= 1 are required")
    if call_format not in ("json", "xml"):
        raise DefinitionError(f"action {name!r}: call_format is 'json' or 'xml', got {call_format!r}")
    if fire_and_forget not in (True, False, "without_output_path"):
        raise DefinitionError(f"action {name!r}: fire_and_forget is True, False or 'without_output_path'")
    if wait_for_input < 0:
        raise DefinitionError(f"action {name!r}: wait_for_input is seconds, 0 or more, not {wait_for_input!r}")
    return Action(
        name=name,
        description=description,
        instructions=instructions,
        schema=as_schema(dict[str, Any] if schema is None else schema, what=f"action {name!r} schema"),
        handler=handler,
        returns=None if returns is None else as_schema(returns, what=f"action {name!r} returns"),
        examples=tuple(examples),
        call_format=call_format,
        enabled=enabled,
        install=install,
        context=context,
        retry=retry,
        queue=queue,
        concurrency=concurrency,
        timeout=timeout,
        format=format,
        on_error=on_error,
        fire_and_forget=fire_and_forget,
        wait_for_input=wait_for_input,
        address=address,
    )


@overload
def output(
    *,
    type: str,
    handler: Callable[[str, OutputContext[A], H], OutputResult | Awaitable[OutputResult]] | None = None,
    description: str = "",
    instructions: str = "",
    attributes: type[A] | Schema[A] | None = None,
    format: Callable[[OutputRef], str] | None = None,
    examples: Sequence[str] = (),
    install: Callable[[Setup], Any] | None = None,
    enabled: Callable[[ContextState], bool] | None = None,
    context: Context[Any] | None = None,
    retry: int = 0,
    errors_to_model: bool = False,
) -> Output[str, A]: ...
@overload
def output(
    *,
    type: str,
    handler: Callable[[S, OutputContext[A], H], OutputResult | Awaitable[OutputResult]] | None = None,
    description: str = "",
    instructions: str = "",
    schema: type[S] | Schema[S],
    attributes: type[A] | Schema[A] | None = None,
    format: Callable[[OutputRef], str] | None = None,
    examples: Sequence[str] = (),
    install: Callable[[Setup], Any] | None = None,
    enabled: Callable[[ContextState], bool] | None = None,
    context: Context[Any] | None = None,
    retry: int = 0,
    errors_to_model: bool = False,
) -> Output[S, A]: ...
@overload
def output(
    *,
    type: str,
    handler: Callable[[Any, OutputContext[A], H], OutputResult | Awaitable[OutputResult]] | None = None,
    description: str = "",
    instructions: str = "",
    schema: UnionType | _SpecialForm,
    attributes: type[A] | Schema[A] | None = None,
    format: Callable[[OutputRef], str] | None = None,
    examples: Sequence[str] = (),
    install: Callable[[Setup], Any] | None = None,
    enabled: Callable[[ContextState], bool] | None = None,
    context: Context[Any] | None = None,
    retry: int = 0,
    errors_to_model: bool = False,
) -> Output[Any, A]: ...
def output(
    *,
    type: str,
    handler: Callable[[Any, OutputContext[Any], Any], OutputResult | Awaitable[OutputResult]] | None = None,
    description: str = "",
    instructions: str = "",
    schema: Any = str,
    attributes: Any = None,
    format: Callable[[OutputRef], str] | None = None,
    examples: Sequence[str] = (),
    install: Callable[[Any], Any] | None = None,
    enabled: Callable[[ContextState], bool] | None = None,
    context: Context[Any] | None = None,
    retry: int = 0,
    errors_to_model: bool = False,
) -> Output[Any, Any]:
    """Define an output; content defaults to a string, ``attributes`` is a model for the tag's attributes (the
    handler's ``ctx.attributes``; without one, the attributes as text). A failing handler runs again ``retry``
    times, then is logged, not sent back to the model, unless ``errors_to_model`` (``Output``)."""
    _check_name(type, "output type")
    if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
        raise DefinitionError(f"output {type!r}: retry must be a whole number of retries (0 or more), got {retry!r}")
    for attr, fn in (
        ("handler", handler),
        ("format", format),
        ("install", install),
        ("enabled", enabled),
    ):
        _check_callable(fn, f"output {type!r}: {attr}")
    return Output(
        type=type,
        description=description,
        instructions=instructions,
        schema=as_schema(schema, what=f"output {type!r} schema"),
        attributes=None if attributes is None else as_schema(attributes, what=f"output {type!r} attributes"),
        handler=handler,
        format=format,
        examples=tuple(examples),
        install=install,
        enabled=enabled,
        context=context,
        retry=retry,
        errors_to_model=errors_to_model,
    )


@overload
def input(
    *,
    type: str,
    handler: Callable[[str, InputContext, H], Any] | None = None,
    subscribe: Callable[[Send, Setup], Any] | None = None,
    install: Callable[[Setup], Any] | None = None,
    format: Callable[[InputRef], str] | None = None,
    context: Context[Any] | None = None,
) -> Input[str]: ...
@overload
def input(
    *,
    type: str,
    schema: type[S] | Schema[S],
    handler: Callable[[S, InputContext, H], Any] | None = None,
    subscribe: Callable[[Send, Setup], Any] | None = None,
    install: Callable[[Setup], Any] | None = None,
    format: Callable[[InputRef], str] | None = None,
    context: Context[Any] | None = None,
) -> Input[S]: ...
@overload
def input(
    *,
    type: str,
    schema: UnionType | _SpecialForm,
    handler: Callable[[Any, InputContext, H], Any] | None = None,
    subscribe: Callable[[Send, Setup], Any] | None = None,
    install: Callable[[Setup], Any] | None = None,
    format: Callable[[InputRef], str] | None = None,
    context: Context[Any] | None = None,
) -> Input[Any]: ...
def input(
    *,
    type: str,
    schema: Any = str,
    handler: Callable[[Any, InputContext, Any], Any] | None = None,
    subscribe: Callable[[Send, Any], Any] | None = None,
    install: Callable[[Any], Any] | None = None,
    format: Callable[[InputRef], str] | None = None,
    context: Context[Any] | None = None,
) -> Input[Any]:
    """Define an input type; ``subscribe(send, agent)`` is started by ``agent.start()``."""
    _check_name(type, "input type")
    for attr, fn in (
        ("handler", handler),
        ("subscribe", subscribe),
        ("install", install),
        ("format", format),
    ):
        _check_callable(fn, f"input {type!r}: {attr}")
    return Input(
        type=type,
        schema=as_schema(schema, what=f"input {type!r} schema"),
        handler=handler,
        subscribe=subscribe,
        install=install,
        format=format,
        context=context,
    )


def _default_key(args: Any) -> str:
    if args is None:
        return "default"
    if isinstance(args, dict):
        return ":".join(str(v) for v in args.values()) or "default"
    if hasattr(args, "model_dump"):
        return ":".join(str(v) for v in args.model_dump().values()) or "default"
    return str(args)


@overload
def context(
    *,
    type: str,
    schema: type[S] | Schema[S],
    key: Callable[[S], str] | None = None,
    create: Callable[[ContextState[S]], Any] | None = None,
    render: Callable[[ContextState[S]], str] | None = None,
    instructions: str | Callable[[ContextState[S]], str] = "",
    description: str = "",
    max_steps: int = 5,
    max_working_memory: int = 40,
    max_prompt_tokens: int = 6000,
    keep_logs: int = 200,
    working_memory: Literal["window", "run"] = "window",
    uses: Callable[[ContextState[S]], Sequence[ContextUse]] | None = None,
    actions: Sequence[AnyAction] = (),
    outputs: Sequence[AnyOutput] = (),
    inputs: Sequence[Input] = (),
    on_run: Callable[[ContextState[S], H], Any] | None = None,
    while_running: Callable[[ContextState[S], H], AbstractAsyncContextManager[Any]] | None = None,
    on_step: Callable[[ContextState[S], H], Any] | None = None,
    on_error: Callable[[Exception, ContextState[S], H], Any] | None = None,
    should_continue: Callable[[ContextState[S], H], bool] | None = None,
    load: Callable[[str, H], Any] | None = None,
    save: Callable[[ContextState[S], H], Any] | None = None,
    settings_from: Callable[[S], Any | None] | None = None,
    conversation: bool = False,
    chat_of: Callable[[S], PlatformChat] | None = None,
    from_platform: Callable[[PlatformChat], S] | None = None,
    version: int = 1,
    upgrade: Callable[[Any, int], Any] | None = None,
    example_args: S | None = None,
) -> Context[S]: ...
@overload
def context(
    *,
    type: str,
    schema: UnionType | _SpecialForm | None = None,
    key: Callable[[Any], str] | None = None,
    create: Callable[[ContextState], Any] | None = None,
    render: Callable[[ContextState], str] | None = None,
    instructions: str | Callable[[ContextState], str] = "",
    description: str = "",
    max_steps: int = 5,
    max_working_memory: int = 40,
    max_prompt_tokens: int = 6000,
    keep_logs: int = 200,
    working_memory: Literal["window", "run"] = "window",
    uses: Callable[[ContextState], Sequence[ContextUse]] | None = None,
    actions: Sequence[AnyAction] = (),
    outputs: Sequence[AnyOutput] = (),
    inputs: Sequence[Input] = (),
    on_run: Callable[[ContextState, H], Any] | None = None,
    while_running: Callable[[ContextState, H], AbstractAsyncContextManager[Any]] | None = None,
    on_step: Callable[[ContextState, H], Any] | None = None,
    on_error: Callable[[Exception, ContextState, H], Any] | None = None,
    should_continue: Callable[[ContextState, H], bool] | None = None,
    load: Callable[[str, H], Any] | None = None,
    save: Callable[[ContextState, H], Any] | None = None,
    settings_from: Callable[[Any], Any | None] | None = None,
    conversation: bool = False,
    chat_of: Callable[[Any], PlatformChat] | None = None,
    from_platform: Callable[[PlatformChat], Any] | None = None,
    version: int = 1,
    upgrade: Callable[[Any, int], Any] | None = None,
    example_args: Any | None = None,
) -> Context[Any]: ...
def context(
    *,
    type: str,
    schema: Any = None,
    key: Callable[[Any], str] | None = None,
    create: Callable[[ContextState], Any] | None = None,
    render: Callable[[ContextState], str] | None = None,
    instructions: str | Callable[[ContextState], str] = "",
    description: str = "",
    max_steps: int = 5,
    max_working_memory: int = 40,
    max_prompt_tokens: int = 6000,
    keep_logs: int = 200,
    working_memory: Literal["window", "run"] = "window",
    uses: Callable[[ContextState], Sequence[ContextUse]] | None = None,
    actions: Sequence[AnyAction] = (),
    outputs: Sequence[AnyOutput] = (),
    inputs: Sequence[Input] = (),
    on_run: Callable[[ContextState, Any], Any] | None = None,
    while_running: Callable[[ContextState, Any], AbstractAsyncContextManager[Any]] | None = None,
    on_step: Callable[[ContextState, Any], Any] | None = None,
    on_error: Callable[[Exception, ContextState, Any], Any] | None = None,
    should_continue: Callable[[ContextState, Any], bool] | None = None,
    load: Callable[[str, Any], Any] | None = None,
    save: Callable[[ContextState, Any], Any] | None = None,
    settings_from: Callable[[Any], Any | None] | None = None,
    conversation: bool = False,
    chat_of: Callable[[Any], PlatformChat] | None = None,
    from_platform: Callable[[PlatformChat], Any] | None = None,
    version: int = 1,
    upgrade: Callable[[Any, int], Any] | None = None,
    example_args: Any | None = None,
) -> Context[Any]:
    """Define a context; ``schema`` validates the arguments (default: anything) and ``key(args)`` names the
    instance (mypy checks that it and the hooks read what the schema declares)."""
    _check_name(type, "context type")
    for attr, fn in (
        ("key", key),
        ("create", create),
        ("render", render),
        ("on_run", on_run),
        ("while_running", while_running),
        ("on_step", on_step),
        ("on_error", on_error),
        ("should_continue", should_continue),
        ("load", load),
        ("save", save),
        ("settings_from", settings_from),
        ("uses", uses),
        ("chat_of", chat_of),
        ("from_platform", from_platform),
        ("upgrade", upgrade),
    ):
        _check_callable(fn, f"context {type!r}: {attr}")
    if max_steps < 1 or max_working_memory < 0 or keep_logs < max_working_memory:
        raise DefinitionError(f"context {type!r}: max_steps >= 1 and keep_logs >= max_working_memory >= 0 are required")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise DefinitionError(f"context {type!r}: version is a whole number from 1, not {version!r}")
    if working_memory not in ("window", "run"):
        raise DefinitionError(f"context {type!r}: working_memory is 'window' or 'run', not {working_memory!r}")
    for items, kind, helper in ((actions, Action, "action"), (outputs, Output, "output")):
        for item in items:
            if not isinstance(item, kind):
                raise DefinitionError(
                    f"context {type!r}: {item.__class__.__name__} is not an {helper}; build one with core.{helper}(...)"
                )
    names = [a.name for a in actions]
    if len(set(names)) != len(names):
        raise DefinitionError(f"context {type!r}: two actions share a name in {names}")
    checked = as_schema(Any if schema is None else schema, what=f"context {type!r} schema")
    if example_args is not None:
        try:
            example_args = checked.validate(example_args)
        except ValidationError as exc:
            raise DefinitionError(
                f"context {type!r}: example_args do not fit its schema ({exc}); give arguments its schema accepts"
            ) from exc
    return Context(
        type=type,
        schema=checked,
        key=key or _default_key,
        create=create,
        render=render,
        instructions=instructions,
        description=description,
        max_steps=max_steps,
        max_working_memory=max_working_memory,
        max_prompt_tokens=max_prompt_tokens,
        keep_logs=keep_logs,
        working_memory=working_memory,
        uses=uses,
        actions=tuple(a for a in actions if isinstance(a, Action)),
        outputs=tuple(o for o in outputs if isinstance(o, Output)),
        inputs=tuple(inputs),
        on_run=on_run,
        while_running=while_running,
        on_step=on_step,
        on_error=on_error,
        should_continue=should_continue,
        load=load,
        save=save,
        settings_from=settings_from,
        conversation=conversation,
        chat_of=chat_of,
        from_platform=from_platform,
        version=version,
        upgrade=upgrade,
        example_args=example_args,
    )


def service(
    *,
    name: str,
    start: Callable[[Setup], Any] | None = None,
    stop: Callable[[Setup], Any] | None = None,
) -> Service:
    """Define a service started and stopped with the agent."""
    _check_callable(start, f"service {name!r}: start")
    _check_callable(stop, f"service {name!r}: stop")
    return Service(name=name, start=start, stop=stop)


def extension(
    *,
    name: str,
    install: Callable[[Setup], Any] | None = None,
    contexts: Sequence[Context] = (),
    inputs: Sequence[Input] = (),
    outputs: Sequence[Output] = (),
    actions: Sequence[Action] = (),
    services: Sequence[Service] = (),
) -> Extension:
    """Define an extension: a named bundle of definitions."""
    _check_name(name, "extension name")
    _check_callable(install, f"extension {name!r}: install")
    return Extension(
        name=name,
        install=install,
        contexts=tuple(contexts),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        actions=tuple(actions),
        services=tuple(services),
    )
