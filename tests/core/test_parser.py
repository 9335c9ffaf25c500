"""The incremental parser: the same text cut at every position gives the same events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.parser import StreamParser, TagEnd, TagStart, TagText, Text, parse

SAMPLES = [
    '<response><reasoning>think: a<b and c>d</reasoning><action_call name="add">{"a": 1, "b": "</action_callx>"}'
    "</action_call> stray <foo>bar</foo><output type=\"cli:message\" to='a>b'>Hello <b>you</b> &amp; 🎉</output >"
    "</response>",
    'junk before <output type="t">unterminated because the stream ended',
    '<output type="t"/>after',
    '<<>><output name="x">a</output',
    "</response><reasoning>",
    '<response>\n  <reasoning>multi\nline</reasoning>\n  <output type="x" a="1" b=\'2\' c=3>x</output>\n</response>',
    '<output type="x" title="say &quot;hi&quot;">ok</output>',
    "<response><output type='x'>a </output/> still inside</output></response>",
    "<action_call name=\"a\">{}</action_call><action_call name='b'></action_call>",
    "no tags at all, just < and > and </ and <3",
]


def _normalise(events: list[object]) -> list[object]:
    """Merge adjacent text and drop deltas, so chunkings are comparable."""
    out: list[object] = []
    text = ""
    deltas: dict[int, str] = {}
    for event in events:
        if isinstance(event, Text):
            text += event.text
            continue
        if isinstance(event, TagText):
            deltas[event.index] = deltas.get(event.index, "") + event.text
            continue
        if text:
            out.append(("text", text))
            text = ""
        if isinstance(event, TagEnd) and event.index >= 0:
            assert deltas.pop(event.index, "") == event.content, "deltas must add up to the content"
        out.append(event)
    if text:
        out.append(("text", text))
    return out


def _feed_all(chunks: list[str]) -> list[object]:
    parser = StreamParser()
    events: list[object] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.close())
    return events


def test_reference_parse() -> None:
    events = parse(SAMPLES[0])
    names = [(type(e).__name__, getattr(e, "name", None)) for e in events if not isinstance(e, TagText | Text)]
    assert names == [
        ("TagStart", "response"),
        ("TagStart", "reasoning"),
        ("TagEnd", "reasoning"),
        ("TagStart", "action_call"),
        ("TagEnd", "action_call"),
        ("TagStart", "output"),
        ("TagEnd", "output"),
        ("TagEnd", "response"),
    ]
    ends = [e for e in events if isinstance(e, TagEnd)]
    assert ends[0].content == "think: a<b and c>d"
    assert ends[1].content == '{"a": 1, "b": "</action_callx>"}'
    assert ends[2].attrs == {"type": "cli:message", "to": "a>b"}
    assert ends[2].content == "Hello <b>you</b> & 🎉"  # the entity decoded
    assert all(e.complete for e in ends)
    assert "stray <foo>bar</foo>" in "".join(e.text for e in events if isinstance(e, Text))


def test_every_cut_position_gives_the_same_events() -> None:
    for sample in SAMPLES:
        reference = _normalise(parse(sample))
        for cut in range(len(sample) + 1):
            assert _normalise(_feed_all([sample[:cut], sample[cut:]])) == reference, (sample, cut)
        assert _normalise(_feed_all(list(sample))) == reference, sample


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_chunkings(data: st.DataObject) -> None:
    sample = data.draw(st.sampled_from(SAMPLES))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(sample)), max_size=12)))
    chunks = [sample[a:b] for a, b in zip([0, *cuts], [*cuts, len(sample)], strict=True)]
    assert _normalise(_feed_all(chunks)) == _normalise(parse(sample))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/\"'= abcdeoutpyrsnig_:\n")) | st.characters(), max_size=200))
def test_garbage_never_raises_and_loses_no_text(text: str) -> None:
    events = parse(text)
    # every character ends up somewhere: text, tag content, or inside a tag's markup
    assert all(isinstance(e, TagStart | TagText | TagEnd | Text) for e in events)
    chunked = _feed_all([text[i : i + 3] for i in range(0, len(text), 3)])
    assert _normalise(chunked) == _normalise(events)


def test_unterminated_elements_are_closed_gracefully() -> None:
    events = parse('<response><output type="x">partial')
    end = next(e for e in events if isinstance(e, TagEnd) and e.name == "output")
    assert end.content == "partial" and not end.complete
    assert isinstance(events[-1], TagEnd) and events[-1].name == "response" and not events[-1].complete


def test_incomplete_opening_tag_at_the_end_becomes_text() -> None:
    events = parse('hello <output type="x')
    assert "".join(e.text for e in events if isinstance(e, Text)) == 'hello <output type="x'


def test_name_attribute_is_kept_for_outputs() -> None:
    events = parse('<output name="cli:message">hi</output>')
    end = next(e for e in events if isinstance(e, TagEnd))
    assert end.attrs == {"name": "cli:message"}


def test_deltas_stream_before_the_tag_closes() -> None:
    parser = StreamParser()
    events = parser.feed('<output type="x">Hello wor')
    assert [e.text for e in events if isinstance(e, TagText)] == ["Hello wor"]
    events = parser.feed("ld</outp")
    assert [e.text for e in events if isinstance(e, TagText)] == ["ld"]
    events = parser.feed("ut>")
    assert isinstance(events[-1], TagEnd) and events[-1].content == "Hello world"
