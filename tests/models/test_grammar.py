"""The GBNF generator: every output type and action name is in the grammar, bounds fit the token budget."""

from __future__ import annotations

import re

import pytest

from core.models import GrammarLimits, ModelRequest, build_grammar, grammar_for
from core.models.grammar import limits_for


def rules(grammar: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())


def test_mentions_every_output_type_and_action_name() -> None:
    outputs = ("cli:message", "discord:message", "telegram:message")
    actions = ("remember", "recall", "current_time")
    grammar = build_grammar(output_types=outputs, action_names=actions)
    r = rules(grammar)
    for name in outputs:
        assert f'"\\"{name}\\""' in r["output-type"]
    for name in actions:
        assert f'"\\"{name}\\""' in r["action-name"]
    assert r["item"] == "output | action-call"
    assert r["root"].startswith('"<response>"') and r["root"].endswith('"</response>"')
    assert '"<reasoning>"' in r["reasoning"] and '"</reasoning>"' in r["reasoning"]
    assert r["action-call"].startswith('"<action_call name=" action-name ">" json-object')


def test_every_rule_used_is_defined() -> None:
    grammar = build_grammar(output_types=("a:b",), action_names=("x",))
    r = rules(grammar)
    without_literals = re.sub(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]', " ", " ".join(r.values()))
    used = set(re.findall(r"[a-z][a-z-]*", without_literals))
    assert used <= set(r), used - set(r)


def test_only_outputs_means_no_json_rules() -> None:
    r = rules(build_grammar(output_types=("cli:message",), action_names=()))
    assert r["item"] == "output"
    assert "json-object" not in r and "action-call" not in r


def test_nothing_available_allows_only_reasoning() -> None:
    r = rules(build_grammar(output_types=(), action_names=()))
    assert "item" not in r
    assert r["root"] == '"<response>" gap reasoning gap "</response>"'


def test_names_are_escaped_for_xml_and_gbnf() -> None:
    r = rules(build_grammar(output_types=('say"it', "a\\b"), action_names=("x<y",)))
    assert r["output-type"] == '"\\"a\\\\b\\"" | "\\"say&quot;it\\""'
    assert r["action-name"] == '"\\"x&lt;y\\""'


def test_duplicates_and_empty_names_are_dropped() -> None:
    r = rules(build_grammar(output_types=("b", "a", "b", ""), action_names=()))
    assert r["output-type"] == '"\\"a\\"" | "\\"b\\""'


def test_limits_are_written_as_bounded_repetitions() -> None:
    limits = GrammarLimits(reasoning_chars=10, text_chars=50, min_items=1, max_items=2, string_chars=20)
    r = rules(build_grammar(output_types=("o",), action_names=("a",), limits=limits))
    assert "text-char{0,9}" in r["reasoning"]
    assert "text-char{0,49}" in r["output"]
    assert "(gap item){1,2}" in r["root"]
    assert "{0,20}" in r["json-string"]


@pytest.mark.parametrize("max_tokens", [16, 64, 96, 256, 512, 1024, 8192])
def test_limits_fit_the_token_budget(max_tokens: int) -> None:
    lim = limits_for(max_tokens)
    assert lim.text_chars >= 1 and lim.reasoning_chars >= 0
    if max_tokens >= 64:
        # at three characters per token, tags and all the text fit in max_tokens
        text_tokens = (lim.reasoning_chars + lim.max_items * lim.text_chars) / 3
        assert 16 + 12 * lim.max_items + text_tokens <= max_tokens
    assert lim.reasoning_chars <= 300 and lim.text_chars <= 4000


def test_grammar_for_uses_the_request() -> None:
    request = ModelRequest(system="", prompt="", max_tokens=96, output_types=("cli:message",), action_names=("now",))
    grammar = grammar_for(request)
    assert '"\\"cli:message\\""' in grammar and '"\\"now\\""' in grammar
    assert f"text-char{{0,{limits_for(96).text_chars - 1}}}" in grammar
