"""The templates and static files served by the bot's pages (the web chat here, the operator console in ``bots``):
Jinja2 with autoescape on, everything from the package, nothing from another site."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

__all__ = ("STATIC", "TEMPLATES", "Templates")

TEMPLATES = Path(__file__).parent / "templates"
"""The web chat's templates."""
STATIC = Path(__file__).parent / "static"
"""The web chat's scripts and style sheets (the console uses the style sheet too)."""


class Templates:
    """A Jinja2 environment over template folders, HTML always escaped."""

    def __init__(self, *folders: Path, globals: dict[str, Any] | None = None) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([str(f) for f in folders]),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(globals or {})

    def render(self, name: str, **values: Any) -> str:
        """The template ``name`` rendered with ``values``."""
        return self.env.get_template(name).render(**values)

    def response(self, name: str, *, status: int = 200, **values: Any) -> web.Response:
        """An HTML answer."""
        return web.Response(text=self.render(name, **values), status=status, content_type="text/html")
