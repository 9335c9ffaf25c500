"""Catch-up for a busy group: ``/catchup`` summarizes what was said since the person's last message, with links
(``core.catchup.plugin``)."""

from .plugin import DIGEST_INPUT, CatchUp, CatchUpAsk, parse_catchup

__all__ = ("CatchUp", "CatchUpAsk", "DIGEST_INPUT", "parse_catchup")  # noqa: RUF022 (plain string order)
