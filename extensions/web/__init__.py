"""Talking to the bot in a browser: the web chat, a third platform on the chat layer's adapter skeleton.

``web_extension(settings)`` brings the ``web:chat`` context (one per visitor, named by a signed cookie), the
``web:message`` input and output, and an HTTP server (``WEB_HOST``:``WEB_PORT``, loopback by default) serving the
page, its event stream (answers appear as they are written) and what it posts. The conversation is kept like any
other: history and summaries, ``/forget`` and ``/reset``, the settings commands, the limits of ``BOT_*`` (the user
is ``web:<visitor>``). ``listen=False`` (a fleet's worker) serves nothing and sends the answers to the gateway holding
the page through a relay (``RedisRelay``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core import Host, Setup
    from core.definitions import Extension

    from ..chat.trust import TrustRules
    from .definitions import (
        MESSAGE,
        find_runtime,
        get_runtime,
        web_chat,
        web_message_input,
        web_message_output,
    )
    from .guard import is_loopback, local_only, refused, request_is_local, security_headers, well_formed
    from .hub import Hub
    from .idle import IdleVisitors, forget_visitor
    from .media import MediaShelf
    from .pages import Templates
    from .relay import RedisRelay, Relay
    from .runtime import WebRuntime
    from .settings import WebSettings
    from .visitor_book import LocalVisitorBook, VisitorBook
    from .visitors import Signer, cookie_name, load_secret, visitor_tier

__all__ = (
    "MESSAGE",
    "Hub",
    "IdleVisitors",
    "LocalVisitorBook",
    "MediaShelf",
    "RedisRelay",
    "Relay",
    "Signer",
    "Templates",
    "VisitorBook",
    "WebRuntime",
    "WebSettings",
    "cookie_name",
    "find_runtime",
    "forget_visitor",
    "get_runtime",
    "is_loopback",
    "load_secret",
    "local_only",
    "refused",
    "request_is_local",
    "security_headers",
    "visitor_tier",
    "web_chat",
    "web_extension",
    "web_message_input",
    "web_message_output",
    "web_runtime",
    "well_formed",
)

_LAZY = {
    **dict.fromkeys(
        ("MESSAGE", "find_runtime", "get_runtime", "web_chat", "web_message_input", "web_message_output"),
        "definitions",
    ),
    **dict.fromkeys(
        ("is_loopback", "local_only", "refused", "request_is_local", "security_headers", "well_formed"), "guard"
    ),
    "Hub": "hub",
    "IdleVisitors": "idle",
    "forget_visitor": "idle",
    "MediaShelf": "media",
    "Templates": "pages",
    "RedisRelay": "relay",
    "Relay": "relay",
    "WebRuntime": "runtime",
    "WebSettings": "settings",
    "LocalVisitorBook": "visitor_book",
    "VisitorBook": "visitor_book",
    **dict.fromkeys(("Signer", "cookie_name", "load_secret", "visitor_tier"), "visitors"),
}
"""Where each name of ``__all__`` not defined here lives: imported on first use (PEP 562), so that
``bots`` reading ``extensions.web.settings`` does not load the web server (aiohttp, jinja2) of a bot that serves
no web chat."""


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def web_extension(
    settings: WebSettings,
    *,
    listen: bool = True,
    secret_file: Path | None = None,
    title: str = "",
    gateway_id: str = "",
    relay: Relay | None = None,
    trust: TrustRules | None = None,
    visitors: VisitorBook | None = None,
) -> Extension:
    """The web chat extension. ``secret_file`` keeps a generated signing key when ``WEB_SECRET`` is empty (and,
    without ``visitors``, the visitors file is kept beside it); ``gateway_id``, ``relay`` and ``visitors``
    (``core.fleet.RedisVisitorBook``) connect the processes of a fleet; ``trust``: the owners and members the
    operator names (``BOT_ADMIN_USERS``, ``TRUST_MEMBER_USERS`` with ``web:<visitor id>``); every other visitor has
    the tier of ``WEB_VISITOR_TIER``."""
    from core.definitions import extension, service
    from core.media import media_posters

    from .definitions import MESSAGE, bind_runtime, web_chat, web_message_input, web_message_output
    from .runtime import WebRuntime

    runtime = WebRuntime(
        settings,
        listen=listen,
        secret_file=secret_file,
        title=title,
        gateway_id=gateway_id,
        relay=relay,
        visitors=visitors,
    )
    if trust is not None:
        runtime.set_trust(trust)

    def install(agent: Setup) -> None:
        bind_runtime(agent, runtime)
        media_posters(agent).add(web_chat.type, runtime, reply_output=MESSAGE)  # <img> and <audio> on the page

    return extension(
        name="web",
        install=install,
        contexts=[web_chat],
        inputs=[web_message_input],
        outputs=[web_message_output],
        services=[service(name="web", start=runtime.start, stop=runtime.stop)],
    )


def web_runtime(agent: Host) -> WebRuntime | None:
    """The web chat of ``agent`` (None when it was built without ``web_extension``)."""
    from .definitions import find_runtime

    runtime = find_runtime(agent)
    if runtime is None:
        return None
    from .runtime import WebRuntime  # loaded already when a runtime was bound

    return runtime if isinstance(runtime, WebRuntime) else None
