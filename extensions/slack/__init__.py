"""Talking to the bot in Slack: direct messages and channel threads, through slack-bolt.

``slack_extension(settings)`` brings the ``slack:conversation`` context (a DM, or one thread of a channel), the
``slack:message`` input and output, pictures and spoken replies posted as files, and the app's lifecycle as a
service. Importing this package needs no slack-bolt; building the runtime does
(``pip install daydreams-bots[slack]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.definitions import Extension, extension, service
from core.media import media_posters

from .definitions import (
    MESSAGE,
    ConversationArgs,
    bind_runtime,
    get_runtime,
    slack_conversation,
    slack_message_input,
    slack_message_output,
)
from .settings import SlackMode, SlackSettings

if TYPE_CHECKING:
    from core import Setup

    from ..chat.trust import TrustRules
    from .runtime import SlackRuntime

__all__ = (
    "MESSAGE",
    "ConversationArgs",
    "SlackMode",
    "SlackSettings",
    "get_runtime",
    "slack_conversation",
    "slack_extension",
    "slack_message_input",
    "slack_message_output",
    "slack_runtime",
)


def slack_runtime(settings: SlackSettings, *, listen: bool = True) -> SlackRuntime:
    """Build the slack-bolt side on its own (``slack_extension`` does this for you)."""
    try:
        from .runtime import SlackRuntime
    except ImportError as exc:  # the optional extra is missing
        from core.errors import ConfigError

        raise ConfigError(
            "the Slack adapter needs slack-bolt: pip install 'daydreams-bots[slack]', or leave SLACK_BOT_TOKEN unset"
        ) from exc
    return SlackRuntime(settings, listen=listen)


def slack_extension(settings: SlackSettings, *, listen: bool = True, trust: TrustRules | None = None) -> Extension:
    """The Slack extension. ``listen=False`` (queue workers) only posts: no websocket, no Events API endpoint.
    ``trust``: how authors get their tier (``TRUST_*``)."""
    runtime = slack_runtime(settings, listen=listen)
    if trust is not None:
        runtime.set_trust(trust)

    def install(agent: Setup) -> None:
        bind_runtime(agent, runtime)
        media_posters(agent).add(slack_conversation.type, runtime, reply_output=slack_message_output.type)

    return extension(
        name="slack",
        install=install,
        contexts=[slack_conversation],
        inputs=[slack_message_input],
        outputs=[slack_message_output],
        services=[service(name="slack", start=runtime.start, stop=runtime.stop)],
    )
