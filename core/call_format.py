"""An action's arguments as the model writes them: JSON by default, or XML elements for an action defined with
``call_format="xml"`` (the Prompting seed's ``callFormat``).

XML arguments are one element per argument: ``<city>Paris</city><days>3</days>``. An object's fields are
elements inside its element; a list is its element repeated (``<tag>a</tag><tag>b</tag>``), or ``<item>``
elements inside it. The action's schema says what each argument is: a string is the element's text as written
(stripped of the spaces around it, markup inside kept); any other value is read as JSON when it can be (``3``,
``true``, ``[1, 2]``), else left as text for the schema to validate (``"3"`` for an int is 3); an empty element
of a type that is not a string is ``null``. Like the rest of the response, this is forgiving: an element left
open ends with the body, text between elements is ignored, and a body written as a JSON object is read as JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from .errors import ValidationError
from .schema import Schema

__all__ = ("CallFormat", "xml_arguments")

CallFormat = Literal["json", "xml"]
"""How an action takes its arguments."""

Kind = Literal["string", "object", "array", "value", "any"]

_OPEN = re.compile(r"<([A-Za-z_][\w.\-]*)(?:\s[^<>]*?)?(/?)>")


def xml_arguments(action: str, text: str, schema: Schema) -> Any:
    """The arguments of a call of ``action`` written as XML elements, shaped by ``schema`` for validation."""
    body = text.strip()
    if not body:
        return {}
    if body.startswith("{"):  # the model wrote JSON after all
        try:
            return json.loads(body)
        except json.JSONDecodeError:
            pass
    elements = _elements(body)
    if not elements:
        raise ValidationError(
            f"the arguments of {action!r} are XML elements, one per argument: <name>value</name> "
            "(see the action's schema)"
        )
    root = schema.json_schema
    return _object(elements, root, root.get("$defs", {}) if isinstance(root, Mapping) else {})


def _elements(text: str) -> list[tuple[str, str]]:
    """The top-level elements of ``text`` as ``(name, inner text)``, in order."""
    found: list[tuple[str, str]] = []
    pos = 0
    while True:
        start = _OPEN.search(text, pos)
        if start is None:
            return found
        name = start.group(1)
        if start.group(2):  # <name/>
            found.append((name, ""))
            pos = start.end()
            continue
        tag = re.compile(rf"<(/?){re.escape(name)}(?:\s[^<>]*?)?(/?)>")
        depth, scan, end = 1, start.end(), len(text)
        while depth:
            m = tag.search(text, scan)
            if m is None:  # left open: it ends with the body
                found.append((name, text[start.end() :]))
                return found
            scan, end = m.end(), m.start()
            if m.group(1):
                depth -= 1
            elif not m.group(2):
                depth += 1
        found.append((name, text[start.end() : end]))
        pos = scan


def _object(elements: list[tuple[str, str]], node: Any, defs: Mapping[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    properties = node.get("properties", {}) if isinstance(node, Mapping) else {}
    extra = node.get("additionalProperties") if isinstance(node, Mapping) else None
    grouped: dict[str, list[str]] = {}
    for name, inner in elements:
        grouped.setdefault(name, []).append(inner)
    out: dict[str, Any] = {}
    for name, inners in grouped.items():
        prop = properties.get(name, extra if isinstance(extra, Mapping) else {})
        if _kind(prop, defs) == "array":
            items = _resolve(prop, defs).get("items", {})
            out[name] = [v for inner in inners for v in _items(inner, items, defs)]
        else:
            values = [_value(inner, prop, defs) for inner in inners]
            out[name] = values[0] if len(values) == 1 else values
    return out


def _items(inner: str, items: Any, defs: Mapping[str, Any]) -> list[Any]:
    """The values one element of a list argument holds: its ``<item>`` elements, a JSON list, or one value."""
    children = _elements(inner)
    if children and all(name == "item" for name, _ in children):
        return [_value(child, items, defs) for _, child in children]
    stripped = inner.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(value, list):
                return value
    return [_value(inner, items, defs)]


def _value(inner: str, node: Any, defs: Mapping[str, Any]) -> Any:
    kind = _kind(node, defs)
    if kind == "string":
        return inner.strip()
    if kind in ("object", "any"):
        children = _elements(inner)
        if children:
            return _object(children, node, defs)
    if kind == "array":
        return _items(inner, _resolve(node, defs).get("items", {}), defs)
    stripped = inner.strip()
    if not stripped:
        return None if kind != "any" else ""
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        return stripped


def _resolve(node: Any, defs: Mapping[str, Any]) -> Any:
    """``node``, or what its ``$ref`` names in ``$defs``."""
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
        name = node["$ref"].rsplit("/", 1)[-1]
        if name not in defs:
            break
        node = defs[name]
    return node


def _kind(node: Any, defs: Mapping[str, Any]) -> Kind:
    """What a JSON Schema node holds, as far as reading XML goes."""
    node = _resolve(node, defs)
    if not isinstance(node, Mapping):
        return "any"
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list):
            kinds = {_kind(o, defs) for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")}
            return kinds.pop() if len(kinds) == 1 else "any"
    declared = node.get("type")
    if isinstance(declared, list):
        declared = [t for t in declared if t != "null"]
        declared = declared[0] if len(declared) == 1 else None
    if declared == "string":
        return "string"
    if declared == "object" or (declared is None and "properties" in node):
        return "object"
    if declared == "array":
        return "array"
    if declared is not None:
        return "value"
    choices = node.get("enum", [node["const"]] if "const" in node else None)
    if isinstance(choices, list) and choices:
        return "string" if all(isinstance(c, str) for c in choices) else "value"
    return "any"
