"""The prompt template: sections in place, an empty section takes its paragraph, ``{{content}}`` splits the system
part from the prompt part, and a mistake in a template is a DefinitionError."""

from __future__ import annotations

import pytest

from core import DefinitionError
from core.prompt import FOOTER, INSTRUCTIONS, RESPONSE_FORMAT, PromptTemplate


def test_the_default_template_puts_every_section_in_the_system_part() -> None:
    system, prompt = PromptTemplate(intro="I").render(persona="", content="CONTENT")
    assert system == f"I\n\n{INSTRUCTIONS}\n\n{RESPONSE_FORMAT}\n\n{FOOTER}"
    assert prompt == "CONTENT"
    system, _ = PromptTemplate(intro="I").render(persona="P", content="CONTENT")
    assert system.startswith("I\n\nP\n\n")


def test_what_follows_content_comes_after_it_in_the_prompt_part() -> None:
    template = PromptTemplate(template="{{intro}}\n\n{{content}}\n\n{{response}}", intro="I", response="R")
    assert template.render(content="C") == ("I", "C\n\nR")


def test_a_section_is_inserted_as_written_and_never_read_again() -> None:
    template = PromptTemplate(template="{{intro}} / {{footer}}", intro="{{footer}}", footer="{{calls[0].x}}")
    assert template.render(content="C") == ("{{footer}} / {{calls[0].x}}", "C")


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"template": "{{intro}} {{outro}}"}, "{{outro}}"),
        ({"template": "{{content}} {{content}}"}, "once"),
        ({"footer": 3}, "footer"),
    ],
)
def test_a_bad_template_is_a_definition_error(kw: dict[str, object], says: str) -> None:
    with pytest.raises(DefinitionError, match="create_agent") as info:
        PromptTemplate(**kw)  # type: ignore[arg-type]
    assert says in str(info.value)
