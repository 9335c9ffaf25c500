"""A call's hidden keys and references: where its result goes and what its arguments read.

The keys a call may carry besides its arguments (seed: Acts of Emergence 008):

- ``_outputPath``: where the result is saved, a path or an expression (``statelog`` describes the grammar).
  The action's schema declares it: fixed (a ``const`` or a ``Literal`` of one value, or a pydantic private
  attribute ``_outputPath: Literal["†state.x"]``) or flexible (a string, usually with ``pattern: "^†"``).
  An action whose schema does not declare it refuses it.
- ``_outputMethod``: ``set`` (default), ``merge`` or ``push``. When the schema declares it (a field aliased
  ``_outputMethod``, a ``const``, a pydantic private attribute ``_outputMethod: Literal["push"] = "push"``) the
  schema's value is kept: its default applies when the model writes none, and a fixed value the model
  contradicts is an error, never a silent ``set`` over the older value.
- ``_instances``: run the call as copies (``dataflow.instances``). An item of ``_instances`` may carry its own
  ``_outputPath`` (and ``_outputMethod``): that copy's result is saved there, inside its own workspace, instead of
  the list of every copy's result at the call's path (``†state.w.paris`` and ``†state.w.rome`` are both filled).

``†`` references in the arguments are replaced by their values once the calls of the response that write them
are done (``dataflow.settle``). A reference to a value that nothing has written, and that no call of the response
writes, fails at once, unless the action waits for input (``action(wait_for_input=seconds)``): then it waits up to
that long for an input that writes it (the seed's "a user's name, even before the user has provided it": a data
message, ``data_input``), and fails with a result that says no input supplied it.
"""

from __future__ import annotations

import asyncio
import json
import typing
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

import pydantic_core

from .call_format import xml_arguments
from .dataflow import CallSlot, Workspace, current_workspace, instances, settle
from .errors import ActionError, TemplateError, ValidationError
from .schema import Schema
from .statelog import Expr, Method, Path, StateLog, choose_targets, find_refs, parse_expr, path_text, substitute

__all__ = (
    "CallKeys",
    "PreparedCall",
    "Target",
    "call_keys",
    "declared_targets",
    "output_target",
    "prepare_call",
    "save_result",
    "saved_note",
    "view",
)

METHODS: tuple[Method, ...] = ("set", "merge", "push")


def view(log: StateLog) -> StateLog | Workspace:
    """What the code running now reads and writes for ``log``: the copy's workspace inside an instanced call,
    else the log itself."""
    workspace = current_workspace.get()
    return workspace if workspace is not None and workspace.base is log else log


@dataclass(frozen=True, kw_only=True, slots=True)
class CallKeys:
    """What an action's schema says about ``_outputPath`` and ``_outputMethod``."""

    path: bool = False
    """The schema declares ``_outputPath``."""
    path_fixed: str | None = None
    """The one path it allows."""
    path_default: str | None = None
    """The path used when the model writes none."""
    path_validated: bool = False
    """The schema's validator checks ``_outputPath`` (a real field, not a private attribute)."""
    method: bool = False
    """The schema declares ``_outputMethod``."""
    method_fixed: Method | None = None
    """The one method it allows."""
    method_default: Method | None = None
    """The method used when the model writes none."""
    method_validated: bool = False
    """The schema's validator checks ``_outputMethod``."""


_keys: weakref.WeakKeyDictionary[Schema, CallKeys] = weakref.WeakKeyDictionary()


def _from_json(prop: Any) -> tuple[Any, Any]:
    """``(fixed, default)`` of a JSON Schema property."""
    if not isinstance(prop, dict):
        return None, None
    fixed = prop.get("const")
    enum = prop.get("enum")
    if fixed is None and isinstance(enum, list) and len(enum) == 1:
        fixed = enum[0]
    return fixed, prop.get("default", fixed)


def _from_private(tp: Any, name: str) -> tuple[bool, Any, Any]:
    """``(declared, fixed, default)`` of a pydantic model's private attribute ``name``."""
    private = getattr(tp, "__private_attributes__", None)
    if not isinstance(private, dict) or name not in private:
        return False, None, None
    default = getattr(private[name], "default", None)
    if default is pydantic_core.PydanticUndefined:
        default = None
    try:
        hint = typing.get_type_hints(tp).get(name)
    except Exception:  # an annotation that cannot be evaluated here: take the default alone
        hint = None
    fixed = None
    if get_origin(hint) is Literal and len(get_args(hint)) == 1:
        fixed = get_args(hint)[0]
    elif default is not None:
        fixed = default  # a private attribute is never written by the model: its value is the one there is
    return True, fixed, default if default is not None else fixed


def call_keys(schema: Schema) -> CallKeys:
    """What ``schema`` declares about the hidden keys (computed once per schema)."""
    cached = _keys.get(schema)
    if cached is not None:
        return cached
    props = schema.json_schema.get("properties")
    props = props if isinstance(props, dict) else {}
    validated = schema.shown is None  # an external schema's validator only checks for an object
    found: dict[str, tuple[bool, Any, Any, bool]] = {}
    for name in ("_outputPath", "_outputMethod"):
        if name in props:
            fixed, default = _from_json(props[name])
            found[name] = (True, fixed, default, validated)
        else:
            declared, fixed, default = _from_private(schema.tp, name)
            found[name] = (declared, fixed, default, False)
    path, method = found["_outputPath"], found["_outputMethod"]
    for what, value in (("fixed", method[1]), ("default", method[2])):
        if value is not None and value not in METHODS:
            raise ValidationError(f"the schema's {what} _outputMethod {value!r} is not one of set, merge, push")
    keys = CallKeys(
        path=path[0],
        path_fixed=path[1] if isinstance(path[1], str) else None,
        path_default=path[2] if isinstance(path[2], str) else None,
        path_validated=path[3],
        method=method[0],
        method_fixed=method[1],
        method_default=method[2],
        method_validated=method[3],
    )
    _keys[schema] = keys
    return keys


@dataclass(kw_only=True, slots=True)
class PreparedCall:
    """A call's arguments with its references resolved and its hidden keys read."""

    copies: list[Any]
    """The arguments to validate: one item, or one per copy of an instanced call."""
    instanced: bool = False
    """The call was written with ``_instances``."""
    method: Method | None = None
    """The method the model wrote, if the schema does not validate it itself."""
    path: str | None = None
    """The output path the model wrote, if the schema does not validate it itself."""
    own: list[tuple[str | None, Method | None]] | None = None
    """Of an instanced call, the ``(path, method)`` each copy's own item of ``_instances`` wrote (None where it
    wrote none; the schema does not validate them itself)."""


def _method(value: Any) -> Method:
    if value not in METHODS:
        raise ValidationError(f"_outputMethod must be set, merge or push, not {value!r}")
    return typing.cast(Method, value)


def _hidden_keys(name: str, keys: CallKeys, raw: dict[str, Any]) -> tuple[str | None, Method | None]:
    """Check the ``_outputPath`` and ``_outputMethod`` of ``raw`` against what the schema declares; take them out
    of ``raw`` unless the schema validates them itself. Returns ``(path, method)`` taken out."""
    method: Method | None = None
    path: str | None = None
    if "_outputMethod" in raw:
        given = _method(raw["_outputMethod"])
        if keys.method_fixed is not None and given != keys.method_fixed:
            raise ValidationError(
                f"action {name!r} always saves with _outputMethod {keys.method_fixed!r}, not {given!r}; "
                "leave _outputMethod out"
            )
        if not keys.method_validated:
            del raw["_outputMethod"]
            method = given
    if "_outputPath" in raw:
        if not keys.path:
            raise ValidationError(f"action {name!r} takes no _outputPath: its result cannot be saved to the state")
        if not keys.path_validated:
            given_path = raw.pop("_outputPath")
            if keys.path_fixed is not None and given_path != keys.path_fixed:
                raise ValidationError(
                    f"action {name!r} always saves to {keys.path_fixed}, not {given_path!r}; leave _outputPath out"
                )
            if not isinstance(given_path, str):
                raise ValidationError(f"_outputPath must be a string such as †state.x, not {given_path!r}")
            parse_expr(given_path)
            path = given_path
    return path, method


async def prepare_call(
    name: str,
    schema: Schema,
    raw: Any,
    *,
    calls: Sequence[CallSlot],
    index: int,
    log: StateLog,
    wait_for_input: float = 0.0,
) -> PreparedCall:
    """Read the hidden keys of the call ``name`` and resolve its references, waiting for the calls of the
    response (``calls``; this one is at ``index``) that write what it reads, then, for what none of them writes,
    up to ``wait_for_input`` seconds for an input that does (a data message the user sends)."""
    prepared = PreparedCall(copies=[raw])
    if not isinstance(raw, dict | str):
        return prepared
    keys = call_keys(schema)
    if isinstance(raw, dict):
        raw = dict(raw)
        prepared.path, prepared.method = _hidden_keys(name, keys, raw)
    refs = list(find_refs(raw))
    if refs:
        state = view(log)

        def has_value(path: Path) -> bool:
            found, value = state.resolve(path)
            return found and value is not None

        note = await settle(calls, index, refs, has_value)
        raw = await _substituted(raw, state, log, note, wait_for_input)
    if isinstance(raw, dict):
        copies = instances(raw)
        if copies is not None:
            prepared.own = [_hidden_keys(name, keys, copy) for copy in copies]
            prepared.copies = list(copies)
            prepared.instanced = True
            return prepared
    prepared.copies = [raw]
    return prepared


async def _substituted(raw: Any, state: StateLog | Workspace, log: StateLog, note: str, wait: float) -> Any:
    """``raw`` with its references replaced; a reference to a value nothing has written waits up to ``wait``
    seconds for an entry of ``log`` (an input) that gives it one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        try:
            return substitute(raw, state.resolve)
        except TemplateError as exc:
            left = deadline - loop.time()
            if left <= 0:
                if wait > 0:
                    note = f"{note + '; ' if note else ''}no input supplied it within {wait:g}s"
                raise TemplateError(f"{exc}: {note}" if note else str(exc)) from None
        try:
            async with asyncio.timeout(left):
                await log.changed()
        except TimeoutError:
            pass


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """Where a call's result is saved, and how."""

    expr: Expr
    """The output path or expression."""
    written: str
    """As it was written (for messages)."""
    method: Method = "set"
    """How the result combines with older values."""


def output_target(schema: Schema, prepared: PreparedCall, dumped: Any, *, copy: int = 0) -> Target | None:
    """Where the result of a call goes, from its validated arguments (``dumped``, those of copy ``copy``) and
    what ``prepare_call`` read; None when it is not saved (a thought, or fire-and-forget)."""
    keys = call_keys(schema)
    if not keys.path:
        return None
    fields = dumped if isinstance(dumped, dict) else {}
    own_path, own_method = prepared.own[copy] if prepared.own is not None else (None, None)
    written = own_path or prepared.path
    if written is None and keys.path_validated:
        value = fields.get("_outputPath")
        written = value if isinstance(value, str) and value else None
    if written is None:
        written = keys.path_fixed or keys.path_default
    if not written:
        return None
    if keys.method_validated and "_outputMethod" in fields:
        method = _method(fields["_outputMethod"])
    else:
        method = own_method or prepared.method or keys.method_fixed or keys.method_default or "set"
    return Target(expr=parse_expr(written), written=written, method=method)


def save_result(log: StateLog, target: Target, result: Any, *, call: dict[str, Any] | None) -> tuple[Path, ...]:
    """Append ``result`` at the paths ``target`` chooses now (the first empty alternative of ``||``); returns
    them. Raises ``ActionError`` when every alternative already holds a value (nothing is overwritten)."""
    state = view(log)
    paths = choose_targets(target.expr, state.resolve)
    if paths is None:
        shown = json.dumps(result, ensure_ascii=False, default=str)
        raise ActionError(
            f"the result was not saved: every alternative of {target.written} already holds a value "
            f"(the result was {shown[:500]}); add another alternative or write to an empty path"
        )
    for path in paths:
        state.append(path, result, method=target.method, call=call)
    return paths


def saved_note(paths: Sequence[Path]) -> str:
    """``(saved to †a and †b)``."""
    return f"(saved to {' and '.join(path_text(p) for p in paths)})"


def declared_targets(schema: Schema, content: str) -> tuple[Path, ...]:
    """Every path a call may write, read from its text before it runs (calls that read them wait for it)."""
    keys = call_keys(schema)
    if not keys.path:
        return ()
    written: Any = None
    try:
        text = content.strip()
        raw = xml_arguments("", text, schema) if text.startswith("<") else json.loads(text) if text else {}
    except (json.JSONDecodeError, ValidationError):
        return ()
    if isinstance(raw, dict):
        written = raw.get("_outputPath")
    if written is None:
        written = keys.path_fixed or keys.path_default
    every = [written]
    if isinstance(raw, dict) and isinstance(raw.get("_instances"), list):  # each copy may name its own path
        every += [item.get("_outputPath") for item in raw["_instances"] if isinstance(item, dict)]
    found: dict[Path, None] = {}
    for one in every:
        if not isinstance(one, str):
            continue
        try:
            expr = parse_expr(one)
        except ValidationError:
            continue
        found.update(dict.fromkeys(p for alt in expr for p in alt))
    return tuple(found)
