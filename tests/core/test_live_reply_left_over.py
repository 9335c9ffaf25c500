"""A live reply left by a run cancelled before it finished it (its worker lost the context's lease) is not the next
run's: live replies are kept per process under ``(context, step, index)``, which the next run of the context starts
from again. Reused, its record's lost ledger refused the new run's answer ("lease lost: reply not posted"), the run
went on to the model's empty answer and the batch was acknowledged unanswered (issue 28, a second failover)."""

from __future__ import annotations

from core.events import RunEvent, RunEventType
from extensions.chat.exactly_once import ReplyRecord
from extensions.chat.stream import LiveReplies, LiveReply

from .test_live_reply import Sink, split


class Ledger:
    """A run's ledger as a live reply sees it before anything is shown: whether its lease is still held."""

    def __init__(self) -> None:
        self.valid = True


def event(content: str, *, first: bool, context_id: str = "ctx") -> RunEvent:
    return RunEvent(
        type=RunEventType.OUTPUT_TEXT,
        role="assistant",
        is_type_switched=first,
        new_item=first,
        content=content,
        context_id=context_id,
        output_type="chat:message",
        output_index=0,
        step=1,
    )


def live_replies(sink: Sink, ledgers: list[Ledger]) -> LiveReplies:
    """Live replies whose each new reply follows the last of ``ledgers`` (the run going on); nothing is shown before
    the end."""

    def start(e: RunEvent) -> LiveReply:
        record = ReplyRecord(ledgers[-1], "chat:message", streamed=True)  # type: ignore[arg-type]
        return LiveReply(sink=sink, split=split(50), min_chars=1000, record=record)

    return LiveReplies(output_type="chat:message", start=start)


async def test_the_next_run_does_not_finish_a_reply_a_cancelled_run_left() -> None:
    sink = Sink()
    ledgers: list[Ledger] = []
    replies = live_replies(sink, ledgers)
    ledgers.append(Ledger())
    replies.on_event(event("the first run's ans", first=True))
    ledgers[0].valid = False  # its lease is lost: the run is cancelled, no final event comes

    ledgers.append(Ledger())  # the batch's next run, in this process, under a new lease
    replies.on_event(event("the answer", first=True))
    replies.on_event(event(" again", first=False))
    reply = replies.take(("ctx", 1, 0), ledgers[1])
    assert reply is not None and reply.record is not None and reply.record.ledger is ledgers[1]
    assert reply.text == "the answer again"
    await replies.aclose()


async def test_a_reply_recorded_in_another_ledger_is_not_handed_to_this_run() -> None:
    sink = Sink()
    old = Ledger()
    replies = live_replies(sink, [old])
    replies.on_event(event("left over", first=True))
    assert replies.take(("ctx", 1, 0), Ledger()) is None  # the handler posts with its own ledger instead
    await replies.aclose()


async def test_replies_left_by_cancelled_runs_are_dropped_when_another_starts() -> None:
    """A context that never speaks again in this process does not keep its left-over reply for good."""
    sink = Sink()
    ledgers: list[Ledger] = []
    replies = live_replies(sink, ledgers)
    ledgers.append(Ledger())
    replies.on_event(event("cut short", first=True))
    ledgers[0].valid = False  # its run was cancelled: no final event comes, nobody takes it
    assert len(replies) == 1
    ledgers.append(Ledger())
    replies.on_event(event("another conversation", first=True, context_id="other"))
    assert len(replies) == 1 and replies.get(("ctx", 1, 0)) is None and replies.get(("other", 1, 0)) is not None
    await replies.aclose()


async def test_a_reply_left_under_a_lease_still_held_is_not_continued_by_the_next_attempt() -> None:
    """The attempt cancelled in this process while its lease had not run out yet (the batch taken again at once):
    its reply is stopped, not fed this attempt's answer. Fed, the two edited the same message, the second answer
    appended to the first's text ("echo: oneecho: one …", tests/fleet/test_joined_in_order.py under load)."""
    sink = Sink()
    ledgers: list[Ledger] = []
    replies = live_replies(sink, ledgers)
    ledgers.append(Ledger())
    replies.on_event(event("echo: one", first=True))
    left = replies.get(("ctx", 1, 0))
    ledgers.append(Ledger())  # the first attempt's ledger is still valid
    replies.on_event(event("echo: one", first=True))
    reply = replies.take(("ctx", 1, 0), ledgers[1])
    assert reply is not None and reply is not left and reply.text == "echo: one"
    assert left is not None and left.text == "echo: one"  # not continued
    await replies.aclose()
    assert sink.posts == 0 and not sink.versions


async def test_an_output_of_the_same_run_that_begins_again_keeps_its_reply() -> None:
    """Text of one output that follows another kind of event is flagged as a new item: with the same ledger, the
    reply is the same one."""
    sink = Sink()
    ledger = Ledger()
    replies = live_replies(sink, [ledger])
    replies.on_event(event("one", first=True))
    replies.on_event(event(" two", first=True))
    reply = replies.take(("ctx", 1, 0), ledger)
    assert reply is not None and reply.text == "one two"
    await replies.aclose()
