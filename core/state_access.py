"""Seeding and reading a context's state from the author's code (seed: Acts of Emergence 008).

- ``read_state(ctx.state, "†state.user.name")`` reads a path (or an expression, ``†a || †b``) as the model's
  references do; inside a copy of an instanced call it reads that copy's workspace.
- ``write_state(ctx.state, "†state.user", value, method="merge")`` appends a write, as an ``_outputPath`` does.
- ``data_input()`` is an input whose message writes the state: ``agent.send(chat, key, {"type": "data",
  "data": {"user": {"name": "Alex"}}})`` writes at ``†data`` (the seed's Data Message), and
  ``params={"path": "†state.user", "method": "merge"}`` choose another place and method.
"""

from __future__ import annotations

from typing import Any

from .definitions import Context, ContextState, Input, InputContext, input
from .entries import InputRef
from .errors import ValidationError
from .references import METHODS, view
from .statelog import Method, evaluate, parse_expr, parse_path, path_text

__all__ = ("data_input", "read_state", "write_state")

_NOTHING: Any = object()


def read_state(state: ContextState, path: str, default: Any = _NOTHING) -> Any:
    """The value at ``path`` (``†state.user.name``, or ``†a || †b``) of the context's state.

    Returns ``default`` when nothing is there; without a default that raises ``KeyError`` naming the path."""
    found, value = evaluate(parse_expr(path), view(state.state_log).resolve)
    if found:
        return value
    if default is _NOTHING:
        raise KeyError(f"{path.strip()} has no value in the state of {state.id}")
    return default


def write_state(state: ContextState, path: str, value: Any, *, method: Method = "set", note: str = "handler") -> None:
    """Append a write of ``value`` at ``path`` (one path), combined by ``method``; ``note`` is kept as the
    entry's ``_call`` so the log says who wrote it."""
    if method not in METHODS:
        raise ValidationError(f"method must be set, merge or push, not {method!r}")
    view(state.state_log).append(parse_path(path), value, method=method, call={"name": note})


def data_input(*, type: str = "data", root: str = "data", context: Context | None = None) -> Input:
    """An input whose data is written to the state before the run sees it (the seed's Data Message).

    The message's ``data`` goes to ``†<root>`` (``†data``) unless its ``params`` name a ``path``; ``params``
    may also name the ``method`` (``set``, ``merge``, ``push``). The model is shown where the data went; the
    value itself is in the ``<state>`` it reads."""
    default = path_text((root,))
    parse_path(default)

    def handler(data: Any, ctx: InputContext, agent: Any) -> None:
        ref = ctx.input_ref
        path = ref.params.get("path") or default
        method = ref.params.get("method") or "set"
        try:
            if method not in METHODS:
                raise ValidationError(f"method must be set, merge or push, not {method!r}")
            write_state(ctx.state, path, data, method=method, note=f"input:{type}")
        except ValidationError as exc:  # shown to the model and kept in the log: a run never crashes on it
            ref.params["written"] = f"not written: {exc}"
        else:
            ref.params["written"] = f"written to {path} ({method}); see <state>"

    def format(ref: InputRef) -> str:
        return f"data {ref.params.get('written', 'not written')}"

    return input(type=type, schema=Any, handler=handler, format=format, context=context)
