"""What both chat adapters need, written once: the adapter skeleton they fill in (``ChatAdapter``: receive,
decide, run, post, and one start and stop sequence), splitting, reply rules, dedupe, typing indicators, the quote of
what was heard in a voice message, a full inbox (the message waits, the chat is told the bot is busy),
live (streamed) replies, replies posted exactly once in a queued run, the tasks messages are answered in,
what they report to the metrics, and which runtime serves which agent."""

from .adapter import ChatAdapter
from .backpressure import Backpressure, Incoming
from .counters import ChatMetrics, Ignored
from .dedupe import RecentIds
from .exactly_once import ReplyRecord, Uncertain
from .heard import heard_quote
from .policy import Allowlist, ReplyPolicy, should_reply
from .registry import RuntimeRegistry
from .split import split_message
from .stream import LiveReplies, LiveReply, MessageSink
from .tasks import MessageTasks
from .typing_indicator import SharedTyping, keep_typing

__all__ = (
    "Allowlist",
    "Backpressure",
    "ChatAdapter",
    "ChatMetrics",
    "Ignored",
    "Incoming",
    "LiveReplies",
    "LiveReply",
    "MessageSink",
    "MessageTasks",
    "RecentIds",
    "ReplyPolicy",
    "ReplyRecord",
    "RuntimeRegistry",
    "SharedTyping",
    "Uncertain",
    "heard_quote",
    "keep_typing",
    "should_reply",
    "split_message",
)
