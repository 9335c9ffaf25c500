"""The terminal chat as a registered platform (``extensions.platforms``)."""

from __future__ import annotations

from core.definitions import Extension

from ..platforms import Build, Ingest, Platform

__all__ = ("PLATFORM",)


def _build(build: Build) -> Extension:
    from . import cli_extension

    return cli_extension(media_dir=build.data_dir / "media")  # (pictures, voice)


def _ingest(settings: object) -> Ingest:
    return "none"


PLATFORM = Platform(
    name="cli",
    title="The terminal",
    build=_build,
    contexts=("cli:session",),
    ingest=_ingest,
    quiet_ms=0,  # (a person at a terminal sends a line and waits for its answer)
    admin_ids=True,
    id_example="cli:<session>",
)
"""The terminal: one person at a terminal (``bots chat``)."""
