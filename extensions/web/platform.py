"""The web chat as a registered platform (``extensions.platforms``)."""

from __future__ import annotations

from core.definitions import Extension

from ..platforms import Build, Platform
from .settings import WebSettings

__all__ = ("PLATFORM",)


def _build(build: Build) -> Extension:
    from . import web_extension

    return web_extension(
        build.settings,
        listen=build.listen,
        secret_file=build.data_dir / "web_secret",
        title=build.title,
        trust=build.trust,
        **{name: value for name, value in build.fleet.items() if name in WEB_FLEET_OPTIONS},
    )


WEB_FLEET_OPTIONS = ("gateway_id", "relay", "visitors")
"""The options of a fleet (``Build.fleet``) the web chat takes."""


PLATFORM = Platform(
    name="web",
    title="The web chat",
    build=_build,
    settings_group="web",
    settings_class=WebSettings,
    contexts=("web:chat",),
    listening=lambda settings: f"chat on {settings.host}:{settings.port}",
    id_example="web:<visitor id>",  # (not an admin: anyone can be a visitor)
)
"""The web chat: one conversation per visitor, served on the process's own HTTP server; every gateway serves it."""
