"""Plugins: features attached to the step loop's declared hooks, so the engine runs only the loop itself.

A ``Plugin`` belongs to an agent (``create_agent(plugins=[...])`` or ``Bot(plugins=[...])``). When a run starts,
each plugin may return a ``RunHooks`` for that run (``Plugin.begin``): an object holding what the plugin decides
during the run (the run's trust tier, for instance) and the hooks it overrides. The engine calls a hook only on
the plugins that override it, so a bot without plugins runs no plugin code at all, and a plugin pays only for
the hooks it has.

The hooks, in the order a run meets them:

- ``joined(ref)``: an input joined the run (before it is shown to the model);
- ``offer(actions)``: the actions a step offers the model, filtered (trust tiers);
- ``admit(updates)``: what the model may read of the new entries; an input taken out was answered some other
  way (refused over a limit and its author told, or a scheduled text posted as written). Nothing left: the
  model is not called;
- ``allow(request, updates)``: a model call about to be made, with the entries it shows for the first time; False:
  it is not made (a token budget it would overspend; the hook told the author), and those entries are left out;
- ``charged(call)``: a model call's tokens, once it answered (usage counters, costs);
- ``gate(call)``: an action call is about to run: a hook may refuse it or answer it itself (an approval);
- ``called(call)``: an action call succeeded (or was started without waiting for it);
- ``holds(type, shown)``: an output is streaming; True holds its text back from the listeners while what it has
  written so far (``shown``) may still be refused (a repeat);
- ``vet(output)``: an output's tag closed and is about to be delivered: a hook may refuse it;
- ``delivered(type, text)``: an output was delivered;
- ``ended(chain)``: the run is over, its memory not yet saved.

Plugins see a run through ``RunView``: its state, who asked, how to say something in the conversation and how to
report a measure. ``core.plugin`` imports nothing of the engine, and the engine nothing of any plugin.

A plugin may also take part in what the agent does around runs (``Plugin``'s own hooks, called only on the plugins
that override them): ``attach(host)`` once the agent is built, ``loaded(state)`` when a conversation's state is
loaded for a run, ``prepare(state, ref)`` when an input is prepared for it (its attachments read), ``saved(state,
chain)`` once a run's memory is saved, ``reset(context_id, erase=...)`` when a conversation is reset (``/reset``) or
erased (``/forget``), and ``stop()`` when the agent stops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from .errors import DefinitionError

if TYPE_CHECKING:
    from .definition_types import Action, Extension, Host, Setup
    from .entries import ActionCall, InputRef, Log
    from .handler_context import ContextState
    from .models.base import ModelRequest

__all__ = (
    "AgentHooks",
    "Brings",
    "CallGate",
    "ModelCall",
    "OutputGate",
    "Plugin",
    "PluginHooks",
    "RunHooks",
    "RunView",
    "find_plugin",
)


class RunView(Protocol):
    """A run as plugins see it."""

    @property
    def state(self) -> ContextState[Any]:
        """The context instance the run is for."""
        ...

    @property
    def host(self) -> Host:
        """The agent, as handlers see it."""
        ...

    @property
    def steps(self) -> int:
        """Model calls made so far."""
        ...

    @property
    def asker(self) -> str | None:
        """Who wrote the newest input shown to the model (``telegram:123``), None before one."""
        ...

    @property
    def chain(self) -> Sequence[Log]:
        """Every log entry of the run so far."""
        ...

    @property
    def turn(self) -> Sequence[InputRef]:
        """The inputs of the turn being answered: the run's, less those read before its last finished answer (one
        that joins once an answer is out starts a turn of its own, as it would the next run)."""
        ...

    def observe(self, kind: str, value: float = 1.0) -> None:
        """Report a measure of the run to the agent's observers (``kind`` as metrics name them)."""
        ...

    def drop(self, entry: InputRef) -> None:
        """An input the run will not answer (refused): out of working memory and of what the run keeps (the
        history, so a summary does not fold it either): the model never reads it, in this run or later."""
        ...

    async def say(self, text: str, *, record: bool = False) -> None:
        """Post ``text`` as written through the conversation's own output, without the model (a notice, a scheduled
        text); ``record``: it joins working memory, so the model sees it was said. Raises the output's errors."""
        ...

    def spawn(self, work: Awaitable[None]) -> None:
        """Run ``work`` within the current step: the step ends when it has (a notice posted while the model goes
        on)."""
        ...


@dataclass(kw_only=True, slots=True)
class ModelCall:
    """A model call that answered, and what it cost in tokens."""

    request: ModelRequest
    """What was sent."""
    model: str
    """The name of the model that answered."""
    input_tokens: int
    """Tokens sent."""
    output_tokens: int
    """Tokens received."""
    estimated: bool
    """The provider reported no usage: the tokens were estimated from the text."""
    cancelled: int = 0
    """0: the call answered. n: the run's n-th call cancelled before a word was shown because more inputs joined
    (``Run.restart``): its tokens are estimated, and the call that follows answers them all."""
    cached_input_tokens: int = 0
    """Of ``input_tokens``, those the provider read from its prompt cache (a prefix it had seen), as it reported."""


@dataclass(kw_only=True, slots=True)
class CallGate:
    """An action call about to run, as ``gate`` hooks see it. A hook that decides leaves an outcome: ``refuse``
    (the model reads the error) or ``answer`` (a result the hook computed; the handler does not run)."""

    name: str
    """The name the model called (``action`` None: no such action is offered now)."""
    action: Action[Any] | None
    """The action, when one of that name is offered in this step."""
    call: ActionCall
    """The call's log entry (its arguments in ``content``)."""
    check: Callable[[], Awaitable[Any]]
    """Validates the arguments (references resolved) and returns them parsed; raises ``RunError`` when invalid."""
    error: str | None = None
    """Set by ``refuse``."""
    repeat: bool = False
    """Set by ``refuse(..., repeat=True)``: the call only repeats what the run did (a step of nothing else but
    repeats ends the run)."""
    deferred: Awaitable[Any] | None = None
    """Set by ``answer``: awaited for the result the model reads."""
    done: bool = field(default=False)
    """A hook decided."""

    def refuse(self, error: str, *, repeat: bool = False) -> None:
        """The call does not run; the model reads ``error`` (``repeat``: it only repeats what the run did)."""
        self.error, self.repeat, self.done = error, repeat, True

    def answer(self, result: Awaitable[Any]) -> None:
        """The call does not run; the model reads what ``result`` gives (it may raise ``RunError``)."""
        self.deferred, self.done = result, True


@dataclass(kw_only=True, slots=True)
class OutputGate:
    """An output about to be delivered, as ``vet`` hooks see it; ``refuse`` keeps it from being delivered (the model
    reads the error)."""

    type: str
    """The output's type."""
    text: str
    """Its text, templates resolved."""
    error: str | None = None
    """Set by ``refuse``."""
    repeat: bool = False
    """Set by ``refuse(..., repeat=True)``: it only repeats what the run delivered."""

    def refuse(self, error: str, *, repeat: bool = False) -> None:
        """The output is not delivered; the model reads ``error``."""
        self.error, self.repeat = error, repeat


class RunHooks:
    """A plugin's part in one run. Override the hooks the plugin needs; the others are never called."""

    def joined(self, ref: InputRef) -> None:
        """An input joined the run."""

    def offer(self, actions: list[Action[Any]]) -> list[Action[Any]]:
        """Of the actions a step would offer, those offered."""
        return actions

    async def admit(self, updates: list[Log]) -> list[Log]:
        """Of the new entries, those the model reads."""
        return updates

    async def allow(self, request: ModelRequest, updates: list[Log]) -> bool:
        """Whether the model call ``request`` (showing ``updates`` for the first time) is made."""
        return True

    async def charged(self, call: ModelCall) -> None:
        """A model call answered."""

    def gate(self, gate: CallGate) -> None:
        """An action call is about to run; ``gate.refuse`` or ``gate.answer`` to decide instead of the handler."""

    def called(self, call: ActionCall) -> None:
        """An action call succeeded (or was started without waiting for it)."""

    def holds(self, output_type: str, shown: str) -> bool:
        """Whether an output streaming ``shown`` so far is held back from the listeners for now."""
        return False

    def vet(self, output: OutputGate) -> None:
        """An output is about to be delivered; ``output.refuse`` to keep it from being delivered."""

    def delivered(self, output_type: str, text: str) -> None:
        """An output was delivered."""

    async def ended(self, chain: Sequence[Log]) -> None:
        """The run is over (before its memory is saved)."""


class Plugin:
    """A feature of a bot on the engine's hooks. Subclass it: ``begin`` returns the run's ``RunHooks`` (None: the
    plugin has nothing to do in this run); ``extension`` the definitions and services it brings."""

    name: ClassVar[str] = "plugin"
    """For logs and errors, and what other plugins name in ``needs`` and ``after``."""
    needs: ClassVar[tuple[str, ...]] = ()
    """The plugins (by ``name``) this one cannot work without: each must be among the agent's, and comes before it
    (``ordered``); one missing is a ``DefinitionError`` as the agent is built."""
    after: ClassVar[tuple[str, ...]] = ()
    """The plugins (by ``name``) that come before this one when the agent has them (their hooks first: the loop
    guard refuses a repeated call before trust tiers see it)."""

    def begin(self, run: RunView) -> RunHooks | None:
        """The plugin's part in a run that starts, or None."""
        return None

    def extension(self) -> Extension | None:
        """Contexts, actions, outputs, inputs and services the plugin brings, installed with the agent."""
        return None

    def attach(self, host: Setup) -> None:
        """The agent is built (it has not started)."""

    async def loaded(self, state: ContextState[Any]) -> None:
        """A conversation's state was loaded for a run."""

    async def prepare(self, state: ContextState[Any], ref: InputRef) -> None:
        """An input is prepared for the run that takes it, before its input handler (its attachments read)."""

    async def saved(self, state: ContextState[Any], chain: Sequence[Log]) -> None:
        """A run ended and its memory was saved (not called for a run whose conversation was reset meanwhile)."""

    async def reset(self, context_id: str, *, erase: bool) -> None:
        """A conversation was reset (``/reset``), or, with ``erase``, everything about it erased (``/forget``)."""

    async def forgotten(self, context_id: str, entries: Sequence[InputRef], message_ids: Collection[str]) -> None:
        """Platform messages of ``context_id`` were deleted by their authors (``message_ids``): ``entries`` left its
        working memory and its run; what the plugin keeps of them goes too (the long memory's history)."""

    async def stop(self) -> None:
        """The agent stops (after its runs)."""


HOOKS = ("joined", "offer", "admit", "allow", "charged", "gate", "called", "holds", "vet", "delivered", "ended")
"""The hooks of ``RunHooks``, by name."""

P = TypeVar("P", bound=Plugin)


@dataclass(kw_only=True, slots=True)
class PluginHooks:
    """A run's hooks, each the bound methods of the plugins that override it (in the plugins' order)."""

    joined: tuple[Callable[[InputRef], None], ...] = ()
    offer: tuple[Callable[[list[Action[Any]]], list[Action[Any]]], ...] = ()
    admit: tuple[Callable[[list[Log]], Awaitable[list[Log]]], ...] = ()
    allow: tuple[Callable[[ModelRequest, list[Log]], Awaitable[bool]], ...] = ()
    charged: tuple[Callable[[ModelCall], Awaitable[None]], ...] = ()
    gate: tuple[Callable[[CallGate], None], ...] = ()
    called: tuple[Callable[[ActionCall], None], ...] = ()
    holds: tuple[Callable[[str, str], bool], ...] = ()
    vet: tuple[Callable[[OutputGate], None], ...] = ()
    delivered: tuple[Callable[[str, str], None], ...] = ()
    ended: tuple[Callable[[Sequence[Log]], Awaitable[None]], ...] = ()

    @classmethod
    def of(cls, parts: Sequence[RunHooks]) -> PluginHooks:
        """The hooks ``parts`` override (which parts override which hook is found once per sequence of classes:
        this runs at every run's start, so it only binds the methods)."""
        if not parts:
            return NO_HOOKS
        kinds = tuple(type(part) for part in parts)
        plan = _PLANS.get(kinds)
        if plan is None:
            plan = _PLANS[kinds] = tuple(
                (name, which)
                for name in HOOKS
                if (which := tuple(i for i, kind in enumerate(kinds) if name in _overridden(kind)))
            )
        hooks = cls()
        for name, which in plan:
            setattr(hooks, name, tuple([getattr(parts[i], name) for i in which]))
        return hooks


_OVERRIDES: dict[type[RunHooks], tuple[str, ...]] = {}
"""What each class of ``RunHooks`` overrides, found at its first run (a cache: classes are few and live as long)."""

_PLANS: dict[tuple[type[RunHooks], ...], tuple[tuple[str, tuple[int, ...]], ...]] = {}
"""For a run's parts by class, each hook overridden and the positions of the parts that override it (a cache: an
agent's plugins make one or two such sequences)."""


def _overridden(kind: type[RunHooks]) -> tuple[str, ...]:
    """The hooks of ``RunHooks`` that ``kind`` overrides."""
    found = _OVERRIDES.get(kind)
    if found is None:
        found = _OVERRIDES[kind] = tuple(n for n in HOOKS if getattr(kind, n) is not getattr(RunHooks, n))
    return found


NO_HOOKS = PluginHooks()
"""The hooks of a run without plugins."""

AGENT_HOOKS = ("loaded", "prepare", "saved", "reset", "forgotten", "stop")
"""The hooks of ``Plugin`` the agent calls around runs, by name."""


@dataclass(kw_only=True, slots=True)
class AgentHooks:
    """The agent's hooks, each the bound methods of the plugins that override it (in the plugins' order)."""

    loaded: tuple[Callable[[ContextState[Any]], Awaitable[None]], ...] = ()
    prepare: tuple[Callable[[ContextState[Any], InputRef], Awaitable[None]], ...] = ()
    saved: tuple[Callable[[ContextState[Any], Sequence[Log]], Awaitable[None]], ...] = ()
    reset: tuple[Callable[..., Awaitable[None]], ...] = ()
    forgotten: tuple[Callable[[str, Sequence[InputRef], Collection[str]], Awaitable[None]], ...] = ()
    stop: tuple[Callable[[], Awaitable[None]], ...] = ()

    @classmethod
    def of(cls, plugins: Sequence[Plugin]) -> AgentHooks:
        """The hooks ``plugins`` override."""
        found: dict[str, list[Any]] = {name: [] for name in AGENT_HOOKS}
        for plugin in plugins:
            kind = type(plugin)
            for name in AGENT_HOOKS:
                if getattr(kind, name) is not getattr(Plugin, name):
                    found[name].append(getattr(plugin, name))
        return cls(**{name: tuple(hooks) for name, hooks in found.items()})


def ordered(plugins: Sequence[Plugin]) -> list[Plugin]:
    """``plugins`` in the order their ``needs`` and ``after`` ask (each after the plugins it names), otherwise as
    given: of those whose predecessors are placed, the first given goes next. A need no plugin answers, or plugins
    that need each other in a circle, are a ``DefinitionError`` naming them."""
    names = {p.name for p in plugins}
    for plugin in plugins:
        missing = [n for n in plugin.needs if n not in names]
        if missing:
            raise DefinitionError(
                f"plugin {plugin.name!r} needs {', '.join(repr(n) for n in missing)}, which this agent does not have: "
                f"add {'it' if len(missing) == 1 else 'them'} to plugins=[...] (or go without {plugin.name!r})"
            )
    before = [{n for n in (*p.needs, *p.after) if n in names and n != p.name} for p in plugins]
    if not any(before):
        return list(plugins)
    left = list(range(len(plugins)))
    placed: list[int] = []
    while left:
        pending = {plugins[i].name for i in left}
        ready = next((i for i in left if not before[i] & pending), None)
        if ready is None:
            circle = " -> ".join(plugins[i].name for i in left if before[i] & pending)
            raise DefinitionError(
                f"plugins that need each other in a circle: {circle}; one of them must not need (or come after) another"
            )
        left.remove(ready)
        placed.append(ready)
    return [plugins[i] for i in placed]


def find_plugin(plugins: Sequence[Plugin], kind: type[P]) -> P | None:
    """The first of ``plugins`` that is a ``kind``, or None."""
    return next((p for p in plugins if isinstance(p, kind)), None)


class Brings(Plugin):
    """A plugin that only brings definitions and services (an extension), with no part in runs."""

    name = "brings"

    def __init__(self, extension: Extension) -> None:
        self._extension = extension

    def extension(self) -> Extension:
        return self._extension
