"""Documents read into passages: Markdown and HTML split at their headings (the title cited apart), a PDF by page,
a long section cut at paragraph breaks, and the kinds told from names and content types."""

from __future__ import annotations

from core.knowledge import MAX_CHARS, Passage, kind_of, parse_document, split_markdown

from .support import FAQ_HTML, HANDBOOK, pdf_bytes


def test_markdown_is_split_at_its_headings_and_cites_the_sections_under_its_title() -> None:
    parsed = split_markdown(HANDBOOK + "\n### Express\n\n```\n# not a heading\n```\n", title="handbook.md")
    assert parsed.title == "Acme Handbook"
    assert [p.section for p in parsed.passages] == ["", "Refunds", "Shipping", "Holidays", "Holidays > Express"]
    assert parsed.passages[1].text.startswith("A refund is paid back")
    assert "# not a heading" in parsed.passages[-1].text  # a fenced block is text, not a heading


def test_html_is_read_without_scripts_styles_or_navigation() -> None:
    parsed = parse_document(FAQ_HTML.encode(), name="faq.html", kind="html")
    assert parsed.title == "Acme FAQ"
    assert parsed.passages == [
        Passage(section="Opening hours", text="The shop opens from 9:00 to 18:00, Monday to Saturday."),
        Passage(section="Gift cards", text="Gift cards are valid for two years."),
    ]


def test_a_pdf_is_read_page_by_page() -> None:
    data = pdf_bytes(["Warranty lasts two years.", "Batteries are covered for one year."])
    parsed = parse_document(data, name="/docs/warranty.pdf", kind="pdf")
    assert parsed.title == "warranty.pdf"
    assert [(p.section, p.text) for p in parsed.passages] == [
        ("page 1", "Warranty lasts two years."),
        ("page 2", "Batteries are covered for one year."),
    ]


def test_a_long_section_is_cut_at_paragraphs_within_the_bound() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 60 for i in range(30)]
    parsed = split_markdown("## Long\n\n" + "\n\n".join(paragraphs), title="t")
    assert len(parsed.passages) > 1
    assert all(len(p.text) <= MAX_CHARS and p.section == "Long" for p in parsed.passages)
    assert " ".join(" ".join(p.text.split()) for p in parsed.passages) == " ".join(" ".join(paragraphs).split())


def test_kinds_from_names_and_content_types() -> None:
    assert kind_of("a.MD") == "markdown" and kind_of("b.htm") == "html" and kind_of("c.pdf") == "pdf"
    assert kind_of("notes.txt") == "text" and kind_of("image.png") is None
    assert kind_of("/faq", "text/html; charset=utf-8") == "html"
    assert kind_of("/guide.md", "text/plain") == "markdown"  # a server's text/plain says less than the name
