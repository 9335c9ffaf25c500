"""Talking to the bot in Matrix: rooms and their threads, through matrix-nio.

``matrix_extension(settings)`` brings the ``matrix:room`` context (one per room, and one per thread), the
``matrix:message`` input and output, the commands, and matrix-nio's client as a service. Importing this package
needs no matrix-nio; building the runtime does (``pip install 'daydreams-bots[matrix]'``). Encrypted rooms are
refused with a message unless matrix-nio's end-to-end extra is installed (``runtime.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.definitions import Extension, extension, service
from core.media import media_posters

from .definitions import (
    MESSAGE,
    RoomArgs,
    bind_runtime,
    find_runtime,
    get_runtime,
    matrix_message_input,
    matrix_message_output,
    matrix_room,
)
from .settings import MatrixSettings

if TYPE_CHECKING:
    from core import Setup

    from ..chat.trust import TrustRules
    from .runtime import MatrixRuntime

__all__ = (
    "MESSAGE",
    "MatrixSettings",
    "RoomArgs",
    "bind_runtime",
    "find_runtime",
    "get_runtime",
    "matrix_extension",
    "matrix_message_input",
    "matrix_message_output",
    "matrix_room",
    "matrix_runtime",
)


def matrix_runtime(settings: MatrixSettings, *, listen: bool = True) -> MatrixRuntime:
    """Build the matrix-nio side on its own (``matrix_extension`` does this for you)."""
    try:
        from .runtime import MatrixRuntime
    except ImportError as exc:  # the optional extra is missing
        from core.errors import ConfigError

        raise ConfigError(
            "the Matrix adapter needs matrix-nio: pip install 'daydreams-bots[matrix]', or leave "
            "MATRIX_ACCESS_TOKEN unset"
        ) from exc
    return MatrixRuntime(settings, listen=listen)


def matrix_extension(settings: MatrixSettings, *, listen: bool = True, trust: TrustRules | None = None) -> Extension:
    """The Matrix extension. ``listen=False`` (queue workers) only logs in for posting: no sync. ``trust``: how
    authors get their tier and which bots are answered (``TRUST_*``)."""
    runtime = matrix_runtime(settings, listen=listen)
    if trust is not None:
        runtime.set_trust(trust)

    def install(agent: Setup) -> None:
        bind_runtime(agent, runtime)
        media_posters(agent).add(matrix_room.type, runtime, reply_output=MESSAGE)

    return extension(
        name="matrix",
        install=install,
        contexts=[matrix_room],
        inputs=[matrix_message_input],
        outputs=[matrix_message_output],
        services=[service(name="matrix", start=runtime.start, stop=runtime.stop)],
    )
