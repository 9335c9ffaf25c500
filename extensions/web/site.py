"""What the web chat's pages and relay use of the runtime that serves them (``WebRuntime`` is one): its settings,
the visitors and the pages open here, how a message is taken and a conversation read. The routes and the relay
type against it, so neither imports the runtime that composes them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from core import Host

    from .hub import Hub
    from .idle import IdleVisitors
    from .media import MediaShelf
    from .settings import WebSettings
    from .visitors import Signer

__all__ = ("ChatSite",)


class ChatSite(Protocol):
    """The web chat as its routes and relay see it."""

    settings: WebSettings
    """The ``WEB_*`` settings."""
    title: str
    """The page's title."""
    hub: Hub
    """The pages open in this process."""
    visitors: IdleVisitors
    """The visits and new visitors."""
    gateway_id: str
    """This process's id in a fleet; empty in one process."""
    media: MediaShelf
    """The pictures and voice messages shown on the pages open here."""

    @property
    def signer(self) -> Signer:
        """Signs and checks the visitors' cookies."""
        ...

    @property
    def agent(self) -> Host | None:
        """The agent, once started."""
        ...

    def show(self, visitor: str, event: dict[str, Any]) -> None:
        """Show ``event`` on the visitor's pages open here (a media event's bytes shelved first)."""
        ...

    def take(self, visitor: str, text: str, *, message_id: str) -> bool:
        """Hand a visitor's message to the agent; False when it cannot be taken now."""
        ...

    async def history_of(self, visitor: str) -> list[dict[str, Any]]:
        """What the visitor's page shows of the conversation."""
        ...
