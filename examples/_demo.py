"""A stand-in platform for the examples' scripted demos (``python examples/<name>.py``): one conversation per user,
whose reply is printed.

A platform brings a conversation context (``conversation=True``, keyed by its chat) and its reply output; a bot's
own context is laid over it, as over Telegram's or Discord's chats when the example runs as an APP
(``bots run examples/<name>.py``). So ``agent.say`` in a bot's handler prints here and posts a message there.
"""

from __future__ import annotations

from core import Extension, OutputContext, context, extension, output

__all__ = ("console", "console_extension")

console = context(
    type="console",
    schema=str,
    key=lambda user: user,
    description="A conversation with one user in a terminal.",
    instructions='Answer with <output type="console:message">.',
    conversation=True,
)
"""One conversation, keyed by the user's name."""


def _print(text: str, ctx: OutputContext, agent: object) -> None:
    print(f"bot: {text}")


console_message = output(type="console:message", description="A reply to the user.", context=console, handler=_print)


def console_extension() -> Extension:
    """The stand-in platform: ``create_agent(model=..., bot=bot, extensions=[console_extension()])``, then
    ``agent.send(console, "ada", {"type": "console:message", "data": "..."})``."""
    return extension(name="console", contexts=[console], outputs=[console_message])
