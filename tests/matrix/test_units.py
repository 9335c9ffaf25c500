"""The Matrix package's pure parts: Markdown to the HTML body (raw HTML escaped), commands, operator channels,
relations, the cut of a long text."""

from __future__ import annotations

from extensions.matrix.commands import command_of
from extensions.matrix.definitions import RoomArgs
from extensions.matrix.platform import room_channel
from extensions.matrix.posting import MESSAGE_LIMIT, formatted, pieces, relation


def test_markdown_gets_an_html_body_and_raw_html_is_escaped() -> None:
    assert formatted("just words & more") == {}
    made = formatted("**bold** and `code` <script>alert(1)</script>")
    assert made["format"] == "org.matrix.custom.html"
    assert made["formatted_body"] == (
        "<p><strong>bold</strong> and <code>code</code> &lt;script&gt;alert(1)&lt;/script&gt;</p>"
    )
    assert "<li>a</li>" in formatted("- a\n- b")["formatted_body"]


def test_commands_are_read_with_either_prefix_and_only_when_known() -> None:
    assert command_of("!stop") == ("stop", None)
    assert command_of("/model gpt-4o ") == ("model", "gpt-4o")
    assert command_of("Daydream: !reset") == ("reset", None)
    assert command_of("!HELP") == ("help", None)
    assert command_of("!shrug") is None and command_of("stop") is None and command_of("see /stop") is None


def test_operator_channels_name_a_room_or_a_thread() -> None:
    assert room_channel("!abc:example.org") == ("matrix:room", {"room_id": "!abc:example.org", "thread_id": None})
    assert room_channel("!abc:example.org/$root") == (
        "matrix:room",
        {"room_id": "!abc:example.org", "thread_id": "$root"},
    )
    assert room_channel("#alias:example.org") is None and room_channel("!nohost") is None


def test_a_reply_goes_in_its_thread_quoting_the_message() -> None:
    room = RoomArgs(room_id="!r:x")
    assert relation(room, None) is None
    assert relation(room, "$m") == {"m.in_reply_to": {"event_id": "$m"}}
    thread = RoomArgs(room_id="!r:x", thread_id="$root")
    assert relation(thread, "$m") == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": False,
        "m.in_reply_to": {"event_id": "$m"},
    }
    assert relation(thread, None)["m.in_reply_to"] == {"event_id": "$root"}  # type: ignore[index]


def test_a_long_text_is_cut_into_messages_keeping_every_word() -> None:
    text = "\n\n".join(" ".join(f"w{p}x{n}" for n in range(500)) for p in range(5))
    cut = pieces(text)
    assert len(cut) > 1 and all(len(p) <= MESSAGE_LIMIT for p in cut)
    assert " ".join(cut).split() == text.split()
