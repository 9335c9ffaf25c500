"""What both chat adapters need, written once: splitting, reply rules, dedupe, typing indicators,
live (streamed) replies."""

from .dedupe import RecentIds
from .policy import Allowlist, ReplyPolicy, should_reply
from .split import split_message
from .stream import LiveReplies, LiveReply, MessageSink
from .typing_indicator import SharedTyping, keep_typing

__all__ = (
    "Allowlist",
    "LiveReplies",
    "LiveReply",
    "MessageSink",
    "RecentIds",
    "ReplyPolicy",
    "SharedTyping",
    "keep_typing",
    "should_reply",
    "split_message",
)
