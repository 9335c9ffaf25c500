"""Matrix as a registered platform (``extensions.platforms``): this module imports no matrix-nio."""

from __future__ import annotations

from typing import Any

from core.definitions import Extension

from ..platforms import Build, Platform
from .settings import MatrixSettings

__all__ = ("PLATFORM", "room_channel")


def _build(build: Build) -> Extension:
    from . import matrix_extension

    return matrix_extension(build.settings, listen=build.listen, trust=build.trust)


def _configured(settings: MatrixSettings) -> bool:
    return settings.configured


def _scaling(settings: MatrixSettings, lease_seconds: float) -> str:
    return (
        "Matrix: one bots gateway syncs (each /sync would hand every gateway every event), the others stand by and "
        "take over within REDIS_LEASE_SECONDS, resuming from the sync token kept in the bot account's data"
    )


def room_channel(rest: str) -> tuple[str, dict[str, Any]] | None:
    """An operator's channel ``matrix:<room id>`` (``!abc:example.org``), or a thread of it
    (``matrix:<room id>/<root event id>``): the context type and its arguments."""
    room, _, thread = rest.partition("/")
    if room.startswith("!") and ":" in room and (not thread or thread.startswith("$")):
        return "matrix:room", {"room_id": room, "thread_id": thread or None}
    return None


PLATFORM = Platform(
    name="matrix",
    title="Matrix",
    build=_build,
    settings_group="matrix",
    settings_class=MatrixSettings,
    contexts=("matrix:room",),
    configured=_configured,
    extra="nio",
    token_setting="MATRIX_ACCESS_TOKEN",
    ingest=lambda settings: "single",
    listening=lambda settings: f"/sync on {settings.homeserver}",
    scaling=_scaling,
    admin_ids=True,
    bot_ids=True,
    id_example="matrix:@ann:example.org",
    channel=room_channel,
    channel_forms="matrix:<room id> (matrix:<room id>/<thread root event id> for a thread)",
)
"""Matrix: a room (or a thread of it) is a conversation."""
