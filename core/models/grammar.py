"""A GBNF grammar that forces a small local model to answer in the response format.

With the grammar a model can only write::

    <response><reasoning>...</reasoning>
      (<action_call name="A">{json}</action_call> | <output type="T">text</output>){1,2}
    </response>

where ``A`` is one of the available actions and ``T`` one of the available outputs. Every free-text part has a
length bound derived from the token budget, so the closing tags fit in ``max_tokens`` for ordinary text (a
stream that is cut anyway is closed gracefully by the parser). Free text cannot contain ``<``, so a tag can
only start where the grammar allows one.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .base import ModelRequest, ToolSpec

__all__ = (
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "GrammarLimits",
    "ToolCall",
    "build_grammar",
    "grammar_for",
    "limits_for",
    "parse_tool_call",
    "takes_arguments",
    "tool_call_grammar",
    "tool_call_start",
    "whole_call",
)

_STRUCTURE_TOKENS = 16
"""Tokens spent on ``<response><reasoning></reasoning></response>``."""
_ITEM_TOKENS = 12
"""Tokens spent on the tags of one output or action call."""


@dataclass(frozen=True, kw_only=True)
class GrammarLimits:
    """Length bounds of the free parts of a response."""

    reasoning_chars: int = 300
    """Characters of ``<reasoning>`` at most."""
    text_chars: int = 1200
    """Characters of one ``<output>`` at most (at least one)."""
    string_chars: int = 200
    """Characters of one JSON string inside an action call at most."""
    json_members: int = 12
    """Members of a JSON object (or items of an array) at most."""
    min_items: int = 1
    """Outputs and action calls at least (when any is available)."""
    max_items: int = 2
    """Outputs and action calls at most (a call and the reply, or two replies)."""
    max_newlines: int = 1
    """Line breaks allowed between two elements."""


def limits_for(max_tokens: int, *, chars_per_token: float = 3.0, max_items: int = 2) -> GrammarLimits:
    """Bounds that let a whole response (reasoning and ``max_items`` items) finish within ``max_tokens``,
    counting ``chars_per_token`` characters per token (ordinary English text is about four).

    A grammar cannot bound the sum of the items, so each gets an equal share of what the reasoning leaves."""
    items = max(1, max_items)
    chars = max(0, int((max_tokens - _STRUCTURE_TOKENS - _ITEM_TOKENS * items) * chars_per_token))
    reasoning = min(300, chars // 4)
    text = max(1, min(4000, (chars - reasoning) // items))
    return GrammarLimits(
        reasoning_chars=reasoning, text_chars=text, string_chars=max(8, min(200, text // 3)), max_items=items
    )


def _literal(text: str) -> str:
    """A GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _attr(value: str) -> str:
    """An XML attribute value, quoted."""
    return '"' + html.escape(value, quote=True) + '"'


def _repeat(item: str, low: int, high: int) -> str:
    """``item{low,high}`` (GBNF bounded repetition)."""
    if high <= 0:
        return '""'
    return f"{item}{{{max(0, low)},{high}}}"


def build_grammar(
    *, output_types: Sequence[str], action_names: Sequence[str], limits: GrammarLimits | None = None
) -> str:
    """The GBNF grammar of a response that may use these outputs and actions."""
    lim = limits or GrammarLimits()
    outputs = sorted(dict.fromkeys(t for t in output_types if t))
    actions = sorted(dict.fromkeys(a for a in action_names if a))
    rules: list[tuple[str, str]] = []
    choices: list[str] = []
    if outputs:
        names = " | ".join(_literal(_attr(t)) for t in outputs)
        text = f"text-start {_repeat('text-char', 0, lim.text_chars - 1)}"
        rules.append(("output", f'"<output type=" output-type ">" {text} "</output>"'))
        rules.append(("output-type", names))
        choices.append("output")
    if actions:
        names = " | ".join(_literal(_attr(a)) for a in actions)
        rules.append(("action-call", '"<action_call name=" action-name ">" json-object "</action_call>"'))
        rules.append(("action-name", names))
        choices.append("action-call")
    gap = _repeat('"\\n"', 0, lim.max_newlines)
    body = '"<response>" gap reasoning'
    if choices:
        low = min(lim.min_items, lim.max_items)
        body += f" {_repeat('(gap item)', low, max(1, lim.max_items))}"
    body += ' gap "</response>"'
    reasoning = '""'
    if lim.reasoning_chars > 0:
        reasoning = f"(text-start {_repeat('text-char', 0, lim.reasoning_chars - 1)})?"
    head = [
        ("root", body),
        ("gap", gap),
        ("reasoning", f'"<reasoning>" {reasoning} "</reasoning>"'),
    ]
    if choices:
        head.append(("item", " | ".join(choices)))
    # no "<" (it would open a tag) and no "{" (a "{{...}}" the model makes up would be refused as a template);
    # text does not start with ">" (small models repeat the tag's closing bracket) or ":"
    tail = [("text-start", "[^<{>:\\x20\\t\\n\\r]"), ("text-char", "[^<{]")]
    if actions:
        more = max(0, lim.json_members - 1)
        more_members = _repeat('(ws "," ws json-member)', 0, more)
        more_values = _repeat('(ws "," ws json-value)', 0, more)
        tail += [
            ("json-object", f'"{{" ws ( json-member {more_members} )? ws "}}"'),
            ("json-member", 'json-string ws ":" ws json-value'),
            ("json-value", 'json-object | json-array | json-string | json-number | "true" | "false" | "null"'),
            ("json-array", f'"[" ws ( json-value {more_values} )? ws "]"'),
            (
                "json-string",
                '"\\"" ' + _repeat('(json-char | "\\\\" json-escape)', 0, lim.string_chars) + ' "\\""',
            ),
            ("json-char", '[^"\\\\<\\x00-\\x1f]'),
            ("json-escape", '["\\\\/bfnrt] | "u" [0-9a-fA-F]{4,4}'),
            ("json-number", '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?'),
            ("ws", "[ \\t\\n]{0,8}"),
        ]
    return "\n".join(f"{name} ::= {rule}" for name, rule in [*head, *rules, *tail]) + "\n"


def grammar_for(request: ModelRequest) -> str:
    """The grammar of ``request``: its outputs and actions, with bounds fit to its ``max_tokens``."""
    return build_grammar(
        output_types=request.output_types,
        action_names=request.action_names,
        limits=limits_for(request.max_tokens, max_items=request.max_items or 2),
    )


# -- tool calls in the model's own format (the compact prompt) --------------------------------------------

TOOL_CALL_OPEN = "<tool_call>"
"""How a Hermes-style chat template (Qwen2.5, Qwen3, Hermes) starts a tool call; the call is
``<tool_call>\\n{"name": "...", "arguments": {...}}\\n</tool_call>``."""
TOOL_CALL_CLOSE = "</tool_call>"
_NAME = _literal('"name"')
_ARGUMENTS = _literal('"arguments"')
_MORE_MEMBERS = '(ws "," ws json-member)'
_MORE_VALUES = '(ws "," ws json-value)'
_MAX_ENUMERATED = 64
"""An integer with a range narrower than this is written as the list of its values (the range holds)."""
_DATE = '[12] [0-9]{3,3} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])'
_TIME = '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]'
_FORMATS = {"date": _DATE, "time": _TIME, "date-time": f'{_DATE} "T" {_TIME} (":" [0-5] [0-9])?'}
"""Strings of a JSON Schema ``format`` the grammar writes digit by digit (``2026-06-12``, ``19:30``): a small model
left free writes "Friday" or "7:30 pm", which the action refuses."""
_MAX_DEPTH = 4
"""Nested schemas deeper than this accept any JSON value (the action validates its arguments anyway)."""


class _Rules:
    """GBNF rules under construction, named after the tool they belong to."""

    def __init__(self, root: dict[str, Any], prefix: str, lim: GrammarLimits) -> None:
        self.root = root
        self.prefix = prefix
        self.lim = lim
        self.rules: list[tuple[str, str]] = []
        self._count = 0

    def add(self, body: str) -> str:
        self._count += 1
        name = f"{self.prefix}-{self._count}"
        self.rules.append((name, body))
        return name

    def value(self, schema: Any, depth: int = 0) -> str:
        """The GBNF expression of a JSON value matching ``schema`` (a subset of JSON Schema; anything it does
        not know accepts any JSON value)."""
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return "json-value"
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return self.value((self.root.get("$defs") or {}).get(ref.split("/")[-1]), depth + 1)
        if "const" in schema:
            return _literal(json.dumps(schema["const"], ensure_ascii=False))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return "(" + " | ".join(_literal(json.dumps(v, ensure_ascii=False)) for v in schema["enum"]) + ")"
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return "(" + " | ".join(self.value(o, depth + 1) for o in options) + ")"
        kind = schema.get("type")
        if isinstance(kind, list):
            return "(" + " | ".join(self.value({**schema, "type": k}, depth) for k in kind) + ")"
        if kind == "string":
            shape = _FORMATS.get(str(schema.get("format") or ""))
            if shape is not None:  # a date or a time: only its digits are the model's to write
                return f'"\\"" {shape} "\\""'
            return "json-text" if int(schema.get("minLength") or 0) > 0 else "json-string"
        if kind == "integer":
            low, high = schema.get("minimum"), schema.get("maximum")
            if isinstance(low, int) and isinstance(high, int) and 0 <= high - low < _MAX_ENUMERATED:
                return "(" + " | ".join(_literal(str(n)) for n in range(high, low - 1, -1)) + ")"
            return "json-int"
        if kind == "number":
            return "json-number"
        if kind == "boolean":
            return '("true" | "false")'
        if kind == "null":
            return '"null"'
        if kind == "array":
            item = self.value(schema.get("items"), depth + 1)
            more = _repeat(f'(ws "," ws {item})', 0, self.lim.json_members - 1)
            return self.add(f'"[" ws ( {item} {more} )? ws "]"')
        if kind == "object" or "properties" in schema:
            return self.object(schema, depth)
        return "json-value"

    @staticmethod
    def first_key(schema: dict[str, Any]) -> str | None:
        """The key an object of ``schema`` always starts with: its first required member's, else its only
        optional one's (``object`` allows no empty object), else None."""
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return None
        required = [k for k in properties if k in set(schema.get("required") or ())]
        if required:
            return str(required[0])
        return str(next(iter(properties))) if len(properties) == 1 else None

    def object(self, schema: dict[str, Any], depth: int, *, opened: bool = False) -> str:
        """The rule of an object of ``schema``; ``opened``: only what follows ``{"KEY":``, its ``first_key`` and
        colon (written by the call's fixed start, see ``tool_call_start``)."""
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return "json-object"
        required = [k for k in properties if k in set(schema.get("required") or ())]
        optional = [k for k in properties if k not in required][: self.lim.json_members]

        def member(key: str) -> str:
            return f'{_literal(json.dumps(key, ensure_ascii=False))} ws ":" ws {self.value(properties[key], depth + 1)}'

        if opened:
            first, *rest = required or optional  # (``first_key``: required, else the only optional one)
            members = [f"ws {self.value(properties[first], depth + 1)}", *(member(k) for k in rest if k in required)]
            body = ' ws "," ws '.join(members)
            body += "".join(f' (ws "," ws {member(k)})?' for k in optional if k != first)
            return self.add(f'{body} ws "}}"')
        if required:
            body = ' ws "," ws '.join(member(k) for k in required)
            body += "".join(f' (ws "," ws {member(k)})?' for k in optional)
        else:  # a non-empty ordered subset of the optional members, the first one without a comma (an empty
            # object would let a small model skip the arguments the call is about)
            starts = [
                member(k) + "".join(f' (ws "," ws {member(rest)})?' for rest in optional[i + 1 :])
                for i, k in enumerate(optional)
            ]
            body = "(" + " | ".join(f"({s})" for s in starts) + ")"
        return self.add(f'"{{" ws {body} ws "}}"')


def tool_call_grammar(
    tools: Sequence[ToolSpec],
    *,
    text_chars: int = 600,
    calls: bool = True,
    text: bool = True,
    limits: GrammarLimits | None = None,
) -> str:
    """The GBNF grammar of a reply that is either plain text (``text``) or one call of one of ``tools``
    (``calls``) in the Hermes format of Qwen's chat template::

        <tool_call>
        {"name": "remember", "arguments": {"fact": "The user's name is Ada"}}
        </tool_call>

    The arguments follow each tool's JSON Schema (objects, strings, numbers, enums, arrays; anything else is
    any JSON value). Plain text cannot start with ``<`` or ``{`` (so a reply is told from a call by its first
    character), and no JSON string holds ``<`` or a ``\\u`` escape, so a call can never write a tag or a chat
    template's token."""
    lim = limits or GrammarLimits()
    choices: list[str] = []
    rules: list[tuple[str, str]] = []
    offered = [t for t in tools if t.name] if calls else []
    if offered:
        names: list[str] = []
        for index, tool in enumerate(offered):
            schema = tool.parameters if isinstance(tool.parameters, dict) else {}
            built = _Rules(schema, f"args{index}", lim)
            args = _object_of(tool, built)
            name = _literal(json.dumps(tool.name, ensure_ascii=False))
            rules.append((f"call{index}", f'{name} ws "," ws {_ARGUMENTS} ws ":" ws {args}'))
            rules += built.rules
            names.append(f"call{index}")
        # the call in the template's tags, or as the model may write it instead: a fenced or bare JSON object
        rules.insert(0, ("call-body", f'"{{" ws {_NAME} ws ":" ws ({" | ".join(names)}) ws "}}"'))
        rules.insert(
            0,
            (
                "tool-call",
                f"{_literal(TOOL_CALL_OPEN)} ws call-body ws {_literal(TOOL_CALL_CLOSE)}"
                ' | "```json" ws call-body ws "```" | call-body',
            ),
        )
        choices.append("tool-call")
    if text or not choices:
        rules.insert(0, ("answer", f"answer-start {_repeat('answer-char', 0, max(0, text_chars - 1))}"))
        choices.insert(0, "answer")
    tail_rules = [
        ("answer-start", "[^<>{}`\\[\\]\\x00-\\x20]"),
        ("answer-char", "[^\\x00]"),
        *_json_rules(lim),
    ]
    lines = [("root", " | ".join(choices)), *rules, *tail_rules]
    return "\n".join(f"{name} ::= {rule}" for name, rule in lines) + "\n"


def takes_arguments(tool: ToolSpec) -> bool:
    """Whether a call of ``tool`` has anything to say: its schema lists properties, or its values are typed
    (``dict[str, int]``). A tool of ``dict[str, Any]`` (``recall``, ``list_reminders``) takes none: asked to
    write its arguments, a small model wrote the schema itself (``{"additionalProperties": true, "type":
    "object"}``), and the call was then dropped as made up."""
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    extra = schema.get("additionalProperties")
    return bool(schema.get("properties")) or (isinstance(extra, dict) and bool(extra))


def _object_of(tool: ToolSpec, built: _Rules) -> str:
    """The rule of the arguments of ``tool``: its schema's object, any object for a free one, and an empty one
    for a tool that takes none (``takes_arguments``)."""
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    if schema.get("properties"):
        return built.object(schema, 0)
    return "json-object" if takes_arguments(tool) else '"{" ws "}"'


def whole_call(tool: ToolSpec) -> str:
    """The call of ``tool`` with no arguments (``{}``) as the chat template writes it, for a tool that takes none
    (``takes_arguments``): no model needs to write it."""
    body = json.dumps({"name": tool.name, "arguments": {}}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"


def tool_call_start(tool: ToolSpec, *, limits: GrammarLimits | None = None) -> tuple[str, str]:
    """The call of ``tool`` in two parts: the start its grammar fixes, and the GBNF grammar of the rest.

    The start is the tags, the tool's name and, when the arguments always start with the same member (a required
    one, or the only one), its key::

        <tool_call>
        {"name": "calculate", "arguments": {"expression":

    Given as the start of the assistant's turn (llama.cpp prefills a trailing assistant message), it is evaluated
    in one batch with the prompt instead of written token by token under ``tool_call_grammar``: the model writes
    only the rest (`` "6 * 7"}}``, where the grammar ends it). The call is the start and the rest joined; it has
    no closing tag (``parse_tool_call`` reads it). Each part ends where the model's own tokens do (after a colon,
    before a space), so the rest starts with the token it would have written anyway."""
    lim = limits or GrammarLimits()
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    start = f'{TOOL_CALL_OPEN}\n{{"name": {json.dumps(tool.name, ensure_ascii=False)}, "arguments":'
    built = _Rules(schema, "args", lim)
    first = _Rules.first_key(schema)
    if first is not None:
        start += f" {{{json.dumps(first, ensure_ascii=False)}:"
        rest = built.object(schema, 0, opened=True)
    else:
        rest = f"ws {_object_of(tool, built)}"
    lines = [("root", f'{rest} ws "}}"'), *built.rules, *_json_rules(lim)]
    return start, "\n".join(f"{name} ::= {rule}" for name, rule in lines) + "\n"


def _json_rules(lim: GrammarLimits) -> list[tuple[str, str]]:
    """The rules of JSON values the tool-call grammars share (``ws`` among them)."""
    return [
        ("json-value", 'json-object | json-array | json-string | json-number | "true" | "false" | "null"'),
        (
            "json-object",
            f'"{{" ws ( json-member {_repeat(_MORE_MEMBERS, 0, lim.json_members - 1)} )? ws "}}"',
        ),
        ("json-member", 'json-string ws ":" ws json-value'),
        ("json-array", f'"[" ws ( json-value {_repeat(_MORE_VALUES, 0, lim.json_members - 1)} )? ws "]"'),
        ("json-string", '"\\"" ' + _repeat('(json-char | "\\\\" json-escape)', 0, lim.string_chars) + ' "\\""'),
        (
            "json-text",
            '"\\"" (json-char | "\\\\" json-escape) '
            + _repeat('(json-char | "\\\\" json-escape)', 0, lim.string_chars - 1)
            + ' "\\""',
        ),
        ("json-char", '[^"\\\\<\\x00-\\x1f]'),
        ("json-escape", '["\\\\/bfnrt]'),
        ("json-int", '"-"? ("0" | [1-9] [0-9]{0,15})'),
        ("json-number", '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?'),
        ("ws", "[ \\t\\n]{0,4}"),
    ]


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A call read back from the model's text."""

    name: str
    """The tool's name."""
    arguments: dict[str, Any]
    """Its arguments."""

    def as_action_call(self) -> str:
        """The call in the response format the step loop parses: ``<response><action_call name="...">``. The
        arguments' ``<``, ``>`` and ``&`` are written as JSON escapes, so they can never read as markup."""
        args = json.dumps(self.arguments, ensure_ascii=False)
        args = args.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        return f"<response><action_call name={_attr(self.name)}>{args}</action_call></response>"

    def as_output(self, content: str) -> str:
        """The call of an output offered as a tool (``ToolSpec.output``), as the response format's output: the
        argument ``content`` is its content, the others its attributes (names that are not XML names are left
        out); every value is escaped, so none can read as markup."""
        body = self.arguments.get(content, "")
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        attrs = "".join(
            f" {key}={_attr(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))}"
            for key, value in self.arguments.items()
            if key not in (content, "type") and _XML_NAME.fullmatch(key)
        )
        return f"<response><output type={_attr(self.name)}{attrs}>{html.escape(text, quote=False)}</output></response>"


_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


def parse_tool_call(text: str) -> ToolCall | None:
    """The call in ``text`` (``<tool_call>{json}</tool_call>``, or the JSON object fenced as ```` ```json ````
    or bare), or None when it is not one."""
    body = text.strip()
    for opening, closing in ((TOOL_CALL_OPEN, TOOL_CALL_CLOSE), ("```json", "```")):
        if body.startswith(opening):
            body = body[len(opening) :]
            end = body.find(closing)
            body = body[:end] if end >= 0 else body
            break
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(name=data["name"], arguments=arguments)
