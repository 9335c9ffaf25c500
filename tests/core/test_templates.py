from __future__ import annotations

import pytest

from core.errors import TemplateError
from core.templates import call_refs, has_templates, resolve


def test_whole_template_keeps_the_type() -> None:
    assert resolve("{{calls[0].n}}", {"calls": [{"n": 3}]}) == 3
    assert resolve({"a": ["{{ calls[0].n }}"]}, {"calls": [{"n": 3}]}) == {"a": [3]}


def test_templates_inside_text() -> None:
    scope = {"calls": [{"name": "Ada", "tags": ["x", "y"]}], "memory": {"city": "Paris"}}
    assert resolve("Hi {{calls[0].name}} from {{memory.city}}: {{calls[0].tags}}", scope) == (
        'Hi Ada from Paris: ["x", "y"]'
    )
    assert resolve('{{calls[0]["name"]}}', scope) == "Ada"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{calls[1].x}}", "has no item 1"),
        ("{{calls[0].missing}}", "has no field 'missing'"),
        ("{{nothing.here}}", "unknown name 'nothing'"),
    ],
)
def test_unresolvable_templates_raise(text: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        resolve(text, {"calls": [{"x": 1}], "memory": {}})


def test_the_memory_is_also_the_seed_s_short_term_memory() -> None:
    scope = {"calls": [], "memory": {"topic": "tea"}}
    assert resolve("{{shortTermMemory.topic}} = {{memory.topic}}", scope) == "tea = tea"
    with pytest.raises(TemplateError, match="known: calls, memory, shortTermMemory"):
        resolve("{{nothing}}", scope)


def test_refs_and_detection() -> None:
    assert call_refs({"a": "{{calls[2].x}} and {{calls[0].y}}", "b": ["{{calls[1]}}"]}) == {0, 1, 2}
    assert has_templates(["x", {"y": "{{memory.a}}"}])
    assert not has_templates("{ {not} } {{ not a path }}")
    assert resolve("{{ not a path }}", {}) == "{{ not a path }}"
