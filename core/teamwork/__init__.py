"""Bots that work together: ``ask_bot`` hands a task to another bot, in this process or across the fleet, and returns
its answer, within a depth, a time and a token budget (``core.teamwork.plugin``)."""

from .boxes import AnswerBox, MemoryAnswerBox
from .model import ANSWER_OUTPUT, TASK_INPUT, Answer, TaskArgs, task_context, task_input
from .plugin import ASK_BOT, AskBotArgs, LocalPeer, Peer, Teamwork

__all__ = (  # noqa: RUF022 (sorted as tests/test_public_api.py sorts: plain string order)
    "ANSWER_OUTPUT",
    "ASK_BOT",
    "Answer",
    "AnswerBox",
    "AskBotArgs",
    "LocalPeer",
    "MemoryAnswerBox",
    "Peer",
    "TASK_INPUT",
    "TaskArgs",
    "Teamwork",
    "task_context",
    "task_input",
)
