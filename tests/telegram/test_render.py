"""Markdown to Telegram HTML, and splitting at 4,096 measured after rendering."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extensions.telegram.render import (
    MESSAGE_LIMIT,
    render_html,
    split_markdown,
    split_plain,
    splits_character,
    utf16_len,
    visible_length,
    visible_text,
)
from tests.fakes.telegram_server import parse_html


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("plain & <simple> text", "plain &amp; &lt;simple&gt; text"),
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* and _it_", "<i>it</i> and <i>it</i>"),
        ("***both***", "<b><i>both</i></b>"),
        ("~~gone~~ ||secret||", "<s>gone</s> <tg-spoiler>secret</tg-spoiler>"),
        ("`a < b`", "<code>a &lt; b</code>"),
        ("``code with ` inside``", "<code>code with ` inside</code>"),
        ("snake_case_name stays", "snake_case_name stays"),
        ("see https://x.org/a_b_c_ now", "see https://x.org/a_b_c_ now"),
        ('[docs](https://ex.com/?a=1&b="2")', '<a href="https://ex.com/?a=1&amp;b=&quot;2&quot;">docs</a>'),
        ("[bad](javascript:alert(1))", "[bad](javascript:alert(1))"),
        ("**bold with `code` inside**", "<b>bold with </b><code>code</code><b> inside</b>"),
        ("# Title", "<b>Title</b>"),
        ("## **Title**", "<b>Title</b>"),
        ("- one\n* two\n+ three", "• one\n• two\n• three"),
        ("> quoted\n> more", "<blockquote>quoted\nmore</blockquote>"),
        ("```py\nif a < b:\n    pass\n```", '<pre><code class="language-py">if a &lt; b:\n    pass</code></pre>'),
        ("```\nno language\n```", "<pre>no language</pre>"),
        ("```\nnever closed", "<pre>never closed</pre>"),
        ("**never closed", "**never closed"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("\\*not italic\\*", "*not italic*"),
        ("a ** b", "a ** b"),
    ],
)
def test_render(markdown: str, html: str) -> None:
    assert render_html(markdown) == html
    parse_html(html)  # the fake parses HTML as strictly as Telegram


def test_visible_length_counts_utf16_code_units_after_entities() -> None:
    html = render_html("**👍** &")
    assert visible_text(html) == "👍 &"
    assert visible_length(html) == 4
    assert utf16_len("é👍") == 3


def test_no_cut_inside_an_emoji_sequence_or_accent() -> None:
    text = "👩\u200d👩\u200d👧"
    assert [i for i in range(1, len(text)) if not splits_character(text, i)] == []
    assert splits_character("e\u0301", 1)
    assert splits_character("🇫🇷", 1) and not splits_character("🇫🇷🇩🇪", 2)
    assert not splits_character("ab", 1)


def test_a_long_word_of_emoji_is_cut_between_characters() -> None:
    text = "👍🏽" * 3000  # no space anywhere: the splitter must cut hard, never inside a character
    pieces = split_markdown(text)
    assert len(pieces) >= 2
    assert "".join(pieces) == text
    assert all(visible_length(render_html(p)) <= MESSAGE_LIMIT for p in pieces)
    assert all(not p.startswith("🏽") for p in pieces)


def test_a_long_code_block_is_closed_and_reopened() -> None:
    text = "```python\n" + "\n".join(f"x_{i} = {i} < {i + 1}" for i in range(800)) + "\n```"
    pieces = split_markdown(text)
    assert len(pieces) >= 3
    for piece in pieces:
        html = render_html(piece)
        assert html.startswith('<pre><code class="language-python">') and html.endswith("</code></pre>")
        assert visible_length(html) <= MESSAGE_LIMIT
        parse_html(html)


def test_a_cut_goes_before_a_code_block_rather_than_into_it() -> None:
    prose = "Some words here. " * 200
    code = "```sh\n" + "\n\n".join(f"echo {i}" for i in range(150)) + "\n```"
    pieces = split_markdown(f"{prose}\n\n{code}\n\nDone.")
    assert len(pieces) == 2
    assert pieces[0] == prose.strip() and pieces[1].startswith("```sh")


def test_markup_that_grows_when_cut_is_still_within_the_limit() -> None:
    # cutting **...** in two shows the asterisks again: the pieces are re-measured and cut finer
    text = " ".join(f"**{'w' * 30}**" for _ in range(400))
    pieces = split_markdown(text)
    assert all(visible_length(render_html(p)) <= MESSAGE_LIMIT for p in pieces)


def test_plain_split_measures_utf16() -> None:
    pieces = split_plain("😀" * 3000)
    assert [utf16_len(p) for p in pieces] == [4096, 1904]


_markdown_alphabet = st.sampled_from(
    [*"ab \n*_~|`[]()#>-+\\&<>\"'", "https://x.io/a_b", "```", "```py\n", "👍🏽", "e\u0301", "**", "||", "~~"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_markdown_alphabet, max_size=120).map("".join))
def test_any_markdown_renders_to_html_telegram_accepts(markdown: str) -> None:
    html = render_html(markdown)
    assert visible_text(html) == parse_html(html)


@settings(max_examples=15, deadline=None)
@given(st.lists(_markdown_alphabet, min_size=200, max_size=400).map(lambda parts: "".join(parts) * 12))
def test_any_long_markdown_splits_into_pieces_within_the_limit(markdown: str) -> None:
    for piece in split_markdown(markdown):
        html = render_html(piece)
        assert utf16_len(parse_html(html)) <= MESSAGE_LIMIT
