"""The prompt template: sections in place, an empty section takes its paragraph, the first generated placeholder
(``{{content}}`` or one of its parts) splits the system part from the prompt part, and a mistake in a template is a
DefinitionError."""

from __future__ import annotations

import pytest

from core import DefinitionError
from core.prompt import FOOTER, INSTRUCTIONS, PARTS, RESPONSE_FORMAT, SEED_TEMPLATE, PromptTemplate

PIECES = {name: name.upper() for name in PARTS}


def test_the_default_template_has_the_static_sections_first_and_the_updates_last() -> None:
    """Intro (and persona), instructions, response format, footer, content: the texts that never change are the
    system part, a prefix a provider's prompt cache reads, and the prompt ends with the updates' count, the one line
    that changes at every request (issue 51); the seed's order but for the response format and the footer
    (docs/fidelity.md, P1), which ``SEED_TEMPLATE`` puts after the content."""
    system, prompt = PromptTemplate(intro="I").render(persona="", content="CONTENT")
    assert system == f"I\n\n{INSTRUCTIONS}\n\n{RESPONSE_FORMAT}\n\n{FOOTER}"
    assert prompt == "CONTENT"
    system, _ = PromptTemplate(intro="I").render(persona="P", content="CONTENT")
    assert system == f"I\n\nP\n\n{INSTRUCTIONS}\n\n{RESPONSE_FORMAT}\n\n{FOOTER}"
    _, prompt = PromptTemplate(intro="I").render(content=PIECES)
    assert prompt == "ACTIONS\n\nOUTPUTS\n\nCONTEXTS\n\nWORKINGMEMORY\n\nUPDATES"


def test_the_seed_s_own_order_is_a_template_away() -> None:
    """Intro (and persona), instructions, content, response, footer: the first two are the system part."""
    system, prompt = PromptTemplate(template=SEED_TEMPLATE, intro="I").render(persona="", content="CONTENT")
    assert system == f"I\n\n{INSTRUCTIONS}"
    assert prompt == f"CONTENT\n\n{RESPONSE_FORMAT}\n\n{FOOTER}"


def test_each_part_of_the_content_can_be_placed_apart() -> None:
    template = PromptTemplate(
        template="{{intro}}\n<u>{{updates}}</u>\n{{actions}}\n\n{{content}}\n\n{{footer}}", intro="I", footer="F"
    )
    assert template.render(content=PIECES) == (  # the system part ends where the first generated part starts
        "I\n<u>",
        "UPDATES</u>\nACTIONS\n\nOUTPUTS\n\nCONTEXTS\n\nWORKINGMEMORY\n\nF",
    )
    every = "\n".join("{{" + name + "}}" for name in reversed(PARTS))
    assert PromptTemplate(template="{{intro}}\n" + every, intro="I").render(content=PIECES) == (
        "I",
        "UPDATES\nWORKINGMEMORY\nCONTEXTS\nOUTPUTS\nACTIONS",
    )


def test_the_parts_a_template_does_not_place_are_never_lost() -> None:
    """Without ``{{content}}``, what the template does not place opens the prompt part."""
    template = PromptTemplate(template="{{intro}}\n\n{{updates}}\n\n{{footer}}", intro="I", footer="F")
    assert template.render(content=PIECES) == ("I", "ACTIONS\n\nOUTPUTS\n\nCONTEXTS\n\nWORKINGMEMORY\n\nUPDATES\n\nF")
    assert PromptTemplate(template="{{intro}}\n\n{{footer}}", intro="I", footer="F").render(content=PIECES) == (
        "I\n\nF",
        "ACTIONS\n\nOUTPUTS\n\nCONTEXTS\n\nWORKINGMEMORY\n\nUPDATES",
    )


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
        ({"template": "{{updates}} {{content}} {{updates}}"}, "{{updates}} may appear once"),
        ({"footer": 3}, "footer"),
    ],
)
def test_a_bad_template_is_a_definition_error(kw: dict[str, object], says: str) -> None:
    with pytest.raises(DefinitionError, match=r"AgentOptions\(") as info:
        PromptTemplate(**kw)  # type: ignore[arg-type]
    assert says in str(info.value)
