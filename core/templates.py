"""``{{calls[0].x}}`` templates: a call or an output may use the result of an earlier call of the same
response, or a value of the context's memory, the seed's short-term memory (``{{shortTermMemory.topic}}``, or
``{{memory.topic}}``).

A string that is exactly one template takes the referenced value as it is (a number stays a number);
templates inside longer text are replaced by their text. A template that cannot be resolved raises
``TemplateError``, which the step loop turns into an error the model sees.

``TemplateStream`` does the same to a text that arrives in pieces (an output's deltas): text passes at once, a
template is held from its ``{{`` until its ``}}`` and then replaced by its value's text, so a delta never
carries ``{{calls[0].x}}``. In a response, ``call_scope`` waits for the calls a template names and gives their
results; ``delivered_text`` and ``output_stream`` resolve an output's text with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .dataflow import CallSlot, wait_for_calls
from .errors import TemplateError

if TYPE_CHECKING:
    from .definition_types import ContextState

__all__ = (
    "TemplateStream",
    "call_refs",
    "call_scope",
    "delivered_text",
    "has_templates",
    "output_stream",
    "resolve",
    "template_lookup",
)

_TEMPLATE = re.compile(r"\{\{\s*([A-Za-z_]\w*(?:\[\d+\]|\[\"[^\"\]]*\"\]|\.[A-Za-z_]\w*)*)\s*\}\}")
_STEP = re.compile(r"\[(\d+)\]|\[\"([^\"\]]*)\"\]|\.([A-Za-z_]\w*)")
_ROOT = re.compile(r"[A-Za-z_]\w*")
_CALL_INDEX = re.compile(r"\{\{\s*calls\[(\d+)\]")
ALIASES = {"shortTermMemory": "memory"}
"""Other names of a scope's values: the seed calls the context's memory ``shortTermMemory``."""


def has_templates(value: Any) -> bool:
    """True if any string in ``value`` holds a template."""
    if isinstance(value, str):
        return "{{" in value and _TEMPLATE.search(value) is not None
    if isinstance(value, Mapping):
        return any(has_templates(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_templates(v) for v in value)
    return False


def call_refs(value: Any) -> set[int]:
    """The indexes ``n`` of every ``{{calls[n]...}}`` in ``value``: the calls to wait for."""
    if isinstance(value, str):
        return {int(m.group(1)) for m in _CALL_INDEX.finditer(value)} if "{{" in value else set()
    if isinstance(value, Mapping):
        return set().union(*(call_refs(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(call_refs(v) for v in value)) if value else set()
    return set()


def _lookup(expr: str, scope: Mapping[str, Any]) -> Any:
    root = _ROOT.match(expr)
    assert root is not None
    name = root.group(0)
    key = name if name in scope else ALIASES.get(name, name)
    if key not in scope:
        known = ", ".join(sorted([*scope, *(alias for alias, of in ALIASES.items() if of in scope)])) or "none"
        raise TemplateError(f"{{{{{expr}}}}}: unknown name {name!r} (known: {known})")
    value = scope[key]
    walked = name
    for m in _STEP.finditer(expr, root.end()):
        index, quoted, attr = m.groups()
        if index is not None:
            i = int(index)
            if not isinstance(value, list | tuple) or i >= len(value):
                size = len(value) if isinstance(value, list | tuple) else 0
                raise TemplateError(f"{{{{{expr}}}}}: {walked} has no item {i} (it has {size})")
            value = value[i]
        else:
            key = quoted if quoted is not None else attr
            if isinstance(value, Mapping) and key in value:
                value = value[key]
            elif key is not None and hasattr(value, "model_dump") and hasattr(value, key):
                value = getattr(value, key)
            else:
                raise TemplateError(f"{{{{{expr}}}}}: {walked} has no field {key!r}")
        walked += m.group(0)
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    return json.dumps(value, ensure_ascii=False, default=str)


def resolve(value: Any, scope: Mapping[str, Any]) -> Any:
    """Replace every template in ``value`` (a string, or lists and dicts of them) using ``scope``."""
    if isinstance(value, str):
        if "{{" not in value:
            return value
        whole = _TEMPLATE.fullmatch(value.strip())
        if whole is not None:
            return _lookup(whole.group(1), scope)
        return _TEMPLATE.sub(lambda m: _as_text(_lookup(m.group(1), scope)), value)
    if isinstance(value, Mapping):
        return {k: resolve(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, scope) for v in value]
    return value


class TemplateStream:
    """An incremental resolver of templates in streamed text: ``await feed(piece) -> text``, then
    ``await close() -> text``.

    ``lookup(expr)`` gives the value of ``{{expr}}`` (waiting for the call it names, if it must); a template it
    cannot resolve is left out of the stream (the output then fails as a whole, and says why). What only
    looked like the start of a template (``{{`` with no ``}}`` within ``limit`` characters, or text between
    braces that is not a template) passes as it was written, as ``resolve`` leaves it."""

    __slots__ = ("_held", "limit", "lookup")

    def __init__(self, lookup: Callable[[str], Awaitable[Any]], *, limit: int = 200) -> None:
        self.lookup = lookup
        self.limit = limit
        """At most this many characters are held waiting for a ``}}``."""
        self._held = ""

    async def feed(self, piece: str) -> str:
        """The text that can be shown now (templates resolved); the rest is held."""
        if not self._held and "{" not in piece:
            return piece
        text = self._held + piece
        out: list[str] = []
        while True:
            start = text.find("{{")
            if start < 0:
                keep = 1 if text.endswith("{") else 0  # maybe the first half of a {{
                out.append(text[: len(text) - keep])
                self._held = text[len(text) - keep :]
                break
            out.append(text[:start])
            end = text.find("}}", start + 2)
            if end < 0:
                if len(text) - start > self.limit:  # too long for a template: it was text
                    out.append("{{")
                    text = text[start + 2 :]
                    continue
                self._held = text[start:]
                break
            written = text[start : end + 2]
            out.append(await self._value(written))
            text = text[end + 2 :]
        return "".join(out)

    async def close(self) -> str:
        """What is still held, as it was written (an unclosed ``{{`` is text)."""
        held, self._held = self._held, ""
        return held

    async def _value(self, written: str) -> str:
        m = _TEMPLATE.fullmatch(written)
        if m is None:
            return written
        try:
            return _as_text(await self.lookup(m.group(1)))
        except TemplateError:
            return ""


# -- the templates of a response: the calls they name, waited for --------------------------------------


async def call_scope(
    value: Any, slots: Sequence[CallSlot], *, upto: int, state: ContextState, me: CallSlot | None = None
) -> dict[str, Any]:
    """The scope of ``value``'s templates in a response: once the calls it refers to (among the first ``upto`` of
    ``slots``) are done (``me``: the call that asks, to find cycles), their results and the context's memory."""
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
        await wait_for_calls(me, [slot])
        if slot.error is not None:
            raise TemplateError(f"{{{{calls[{n}]}}}} ({slot.name}) failed: {slot.error}")
    results = [s.future.result() if s.future.done() and s.error is None else None for s in slots[:upto]]
    return {"calls": results, "memory": state.memory if state.memory is not None else {}}


def template_lookup(slots: Sequence[CallSlot], state: ContextState) -> Callable[[str], Awaitable[Any]]:
    """``lookup(expr)``: the value of ``{{expr}}`` for an output of this response, once the call it names is
    done (for ``TemplateStream``)."""

    async def lookup(expr: str) -> Any:
        text = "{{" + expr + "}}"
        return resolve(text, await call_scope(text, slots, upto=len(slots), state=state))

    return lookup


def output_stream(slots: Sequence[CallSlot], state: ContextState) -> TemplateStream:
    """Resolves the templates of one output's deltas as they stream (the step loop makes one per output)."""
    return TemplateStream(template_lookup(slots, state))


async def delivered_text(content: str, slots: Sequence[CallSlot], state: ContextState) -> str:
    """An output's whole text with its templates resolved: the content of its final run event."""
    if "{{" not in content:
        return content.strip()
    stream = output_stream(slots, state)
    return (await stream.feed(content) + await stream.close()).strip()
