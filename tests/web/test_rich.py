"""The web chat's laid-out answers (``extensions.web.rich``): the Markdown an answer is written in becomes HTML, and
what is hostile in it (the answer is model output) comes out inert."""

from __future__ import annotations

from html.parser import HTMLParser

from extensions.web.rich import rendered

_ALLOWED_TAGS = {
    "p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "strong", "em", "s", "code", "pre", "blockquote",
    "hr", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip


class _Elements(HTMLParser):
    """The elements of a piece of HTML with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.found


def test_an_answer_with_structure_is_laid_out() -> None:
    html = rendered(
        "## Prices\n\nThe **three** plans, *monthly*:\n\n| plan | price |\n|---|--:|\n| basic | 4 |\n| pro | 12 |\n\n"
        "- cancel any time\n- [terms](https://example.com/terms)\n\n```\nbots run\n```"
    )
    tags = [tag for tag, _ in elements(html)]
    for tag in ("h2", "strong", "em", "table", "th", "td", "ul", "li", "a", "pre", "code"):
        assert tag in tags, (tag, html)
    assert '<td class="align-right">12</td>' in html  # an alignment as a class: the CSP refuses style attributes
    assert '<a href="https://example.com/terms" target="_blank" rel="noopener noreferrer nofollow">' in html


def test_hostile_markdown_comes_out_inert() -> None:
    hostile = (
        "<script>alert(1)</script>\n\n"
        "<img src=x onerror=alert(2)>\n\n"
        "| name | note |\n|---|---|\n| <b onmouseover=alert(3)>bold</b> | <iframe src=https://evil.example></iframe> |\n\n"
        "[click](javascript:alert(4)) [again](JaVaScRiPt:alert(5)) [data](data:text/html;base64,PHNjcmlwdD4=) "
        "<javascript:alert(6)> [here](vbscript:msgbox) [page](/chat/send)\n\n"
        "![pixel](https://tracker.example/p.png)\n\n"
        '<a href="javascript:alert(7)">raw link</a> <style>body{display:none}</style>'
    )
    html = rendered(hostile)
    found = elements(html)
    assert {tag for tag, _ in found} <= _ALLOWED_TAGS, html
    assert "table" in {tag for tag, _ in found}  # the table is laid out, its cells' HTML shown as text
    for tag, attrs in found:
        assert not any(name.startswith("on") or name in ("style", "src") for name in attrs), (tag, attrs)
        if tag == "a":
            assert str(attrs["href"]).startswith("https://"), attrs  # only the picture's address became a link
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as written
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "&lt;b onmouseover=alert(3)&gt;bold&lt;/b&gt;" in html
    assert 'href="javascript' not in html.lower() and 'href="data' not in html.lower() and "<img" not in html
    assert "[click](javascript:alert(4))" in html and "[page](/chat/send)" in html  # refused links stay text


def test_links_go_to_the_web_and_mail_only() -> None:
    html = rendered("[site](http://example.com) [mail](mailto:help@example.com) [file](file:///etc/passwd)")
    assert [attrs["href"] for tag, attrs in elements(html) if tag == "a"] == [
        "http://example.com",
        "mailto:help@example.com",
    ]
