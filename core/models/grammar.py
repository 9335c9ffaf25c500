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
from collections.abc import Sequence
from dataclasses import dataclass

from .base import ModelRequest

__all__ = ("GrammarLimits", "build_grammar", "grammar_for", "limits_for")

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
