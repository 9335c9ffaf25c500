"""What extensions register: the declared surface an extension, a service or a dispatcher uses to plug into the
agent (readiness checks, observers, event listeners, action sources, media fetchers, services, pinned settings),
each call returning a function that takes the registration back, and the observers' reports. Nothing outside core
mutates the containers."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from .media.reader import READER, MediaReader

if TYPE_CHECKING:
    from .chat_settings import ChatPolicy
    from .definition_types import Check, Observer
    from .definitions import Action, ContextState, Service
    from .dispatch import Dispatcher
    from .events import RunEvent
    from .media.reader import Fetcher
    from .slots import Slot

__all__ = ("ExtensionPoints",)

log = logging.getLogger("core.agent")

T = TypeVar("T")


class ExtensionPoints:
    """The agent's registrations (``core.Agent`` is one): the containers below are the agent's, built in its
    ``__init__``; these methods are the only way code outside core changes them."""

    observers: list[Observer]
    """Metric hooks."""
    event_listeners: list[Callable[[RunEvent], Any]]
    """Listeners that see the events of every run."""
    readiness: dict[str, Check]
    """Readiness checks by name (``/readyz``)."""
    action_sources: list[Callable[[ContextState], Iterable[Action]]]
    """Actions that come and go while the agent runs, asked at every step."""
    services: list[Service]
    """Started with the agent, stopped in reverse order."""
    chat_policy: ChatPolicy
    """The operator's rules for settings changed from the chat."""
    dispatcher: Dispatcher
    """How ``send`` reaches ``run``."""
    slots: dict[Slot[Any] | type[Any], Any]
    """What plugins and extensions provide, by slot or by class (``provide``)."""

    def provide(self, slot: Slot[T] | type[T], value: T) -> Callable[[], None]:
        """Keep ``value`` under ``slot``: a ``Slot`` (a platform's runtime, which its output handlers find with
        ``provided``) or a class (what a plugin provides, found as ``agent.provided(Facts)``); a second value
        replaces the first. This is the one way to find "the X of this agent": nothing is kept in a registry
        beside it, and the value lives and dies with its agent."""
        self.slots[slot] = value

        def take_back() -> None:
            if self.slots.get(slot) is value:
                del self.slots[slot]

        return take_back

    def provided(self, slot: Slot[T] | type[T]) -> T | None:
        """What was given under ``slot`` (a ``Slot`` or a class), or None."""
        found: T | None = self.slots.get(slot)
        return found

    @property
    def distributed(self) -> bool:
        """True when a queue shared with other processes runs the contexts (``Dispatcher.distributed``)."""
        return self.dispatcher.distributed

    @property
    def readiness_checks(self) -> Mapping[str, Check]:
        """The readiness checks registered so far, by name: a read-only view (``add_readiness`` changes it)."""
        return MappingProxyType(self.readiness)

    def add_readiness(self, name: str, check: Check) -> Callable[[], None]:
        """Register the readiness check ``name`` (``/readyz``): it returns (or awaits to) ``True``/``None``
        when ready, ``False`` or a reason string when not, or raises; a ``Degraded`` reason is reported while
        the process stays ready. A second check of the same name replaces the first."""
        self.readiness[name] = check

        def remove() -> None:
            if self.readiness.get(name) is check:
                del self.readiness[name]

        return remove

    def add_observer(self, observer: Observer) -> Callable[[], None]:
        """Have ``observer(kind, context_id, value)`` see what the agent measures (metrics)."""
        if observer not in self.observers:
            self.observers.append(observer)
        return lambda: _discard(self.observers, observer)

    def add_event_listener(self, listener: Callable[[RunEvent], Any]) -> Callable[[], None]:
        """Have ``listener`` see the events of every run in this process (live replies, metrics)."""
        if listener not in self.event_listeners:
            self.event_listeners.append(listener)
        return lambda: _discard(self.event_listeners, listener)

    def add_action_source(self, source: Callable[[ContextState], Iterable[Action]]) -> Callable[[], None]:
        """Offer the actions ``source`` gives at each step (tools that come and go, such as an MCP server's);
        a name already taken by a fixed action is skipped."""
        if source not in self.action_sources:
            self.action_sources.append(source)
        return lambda: _discard(self.action_sources, source)

    def add_media_fetcher(self, source: str, fetch: Fetcher) -> Callable[[], None]:
        """Fetch the attachments whose ``source`` is ``source`` (a platform) with ``fetch`` when a run reads
        them; a worker reads what a gateway only referenced. The fetchers are the reader's that the ``Media``
        plugin provides (``provided(READER)``); without it, a reader of the defaults is provided here to hold them."""
        reader = self.provided(READER)
        if reader is None:
            reader = MediaReader()
            self.provide(READER, reader)
        reader.fetchers[source] = fetch

        def remove() -> None:
            if reader.fetchers.get(source) is fetch:
                del reader.fetchers[source]

        return remove

    def add_service(self, svc: Service, *, first: bool = False) -> Callable[[], None]:
        """Start ``svc`` with the agent (before the others when ``first``) and stop it in reverse order.
        Services added after ``start()`` are only stopped."""
        if first:
            self.services.insert(0, svc)
        else:
            self.services.append(svc)
        return lambda: _discard(self.services, svc)

    def pin_settings(self, context_id: str, pins: Mapping[str, str]) -> None:
        """Hold chat settings of ``context_id`` (and the conversations that take their settings from it) at
        the operator's values: the chat cannot change them (``ChatPolicy.pinned``)."""
        self.chat_policy.pinned.setdefault(context_id, {}).update(pins)

    def observe(self, kind: str, context_id: str, value: float = 1.0) -> None:
        """Report ``value`` of ``kind`` for ``context_id`` (or a platform name) to the observers; an observer
        that raises is logged, never propagated."""
        for observer in self.observers:
            try:
                observer(kind, context_id, value)
            except Exception:
                log.exception("observer %r raised on %s", observer, kind)

    def observe_model(self, context_id: str, seconds: float) -> None:
        """Report a model call's duration to the observers."""
        for observer in self.observers:
            observer("model_seconds", context_id, seconds)

    def observe_output(self, context_id: str, output_type: str) -> None:
        """Report a delivered output to the observers."""
        for observer in self.observers:
            observer("output", context_id, 1.0)


def _discard(items: list[Any], item: Any) -> None:
    with contextlib.suppress(ValueError):
        items.remove(item)
