"""The definitions an agent holds: contexts, actions, outputs and inputs by name, the action sources asked at each
step, and which of them are offered in a context instance."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .bot import layer
from .definitions import Action, Context, ContextState, Input, Output
from .errors import DefinitionError
from .references import call_keys

__all__ = ("Registry",)


class Registry:
    """What an agent can offer, registered once at ``create_agent`` (each name once)."""

    def __init__(self) -> None:
        self.contexts: dict[str, Context] = {}
        """Contexts by type."""
        self.actions: list[Action] = []
        """Actions offered everywhere (subject to their ``context`` and ``enabled``)."""
        self.action_sources: list[Callable[[ContextState], Iterable[Action]]] = []
        """Actions that come and go while the agent runs (the tools of an MCP server, hidden while it is
        down): each source is asked at every step; a name already taken by a fixed action is skipped."""
        self.outputs: list[Output] = []
        """Outputs offered everywhere (subject to their ``context`` and ``enabled``)."""
        self.inputs: dict[str, Input] = {}
        """Inputs by type."""

    def register(
        self,
        contexts: Sequence[Context],
        actions: Sequence[Action],
        outputs: Sequence[Output],
        inputs: Sequence[Input],
        *,
        owner: str,
    ) -> None:
        """Add definitions; ``owner`` (``create_agent``, ``extension 'discord'``) names them in errors."""
        for ctx in contexts:
            if ctx.type in self.contexts and self.contexts[ctx.type] is not ctx:
                raise DefinitionError(f"{owner}: context type {ctx.type!r} is defined twice")
            self.contexts[ctx.type] = ctx
            for inp in ctx.inputs:
                self.inputs.setdefault(inp.type, inp)
            for act in ctx.actions:
                _check_action(act, f"{owner}: context {ctx.type!r}")
        for act in actions:
            if any(a.name == act.name and a is not act for a in self.actions):
                raise DefinitionError(f"{owner}: action {act.name!r} is defined twice")
            _check_action(act, owner)
            if act not in self.actions:
                self.actions.append(act)
        for out in outputs:
            if any(o.type == out.type and o is not out for o in self.outputs):
                raise DefinitionError(f"{owner}: output {out.type!r} is defined twice")
            if out not in self.outputs:
                self.outputs.append(out)
        for inp in inputs:
            if inp.type in self.inputs and self.inputs[inp.type] is not inp:
                raise DefinitionError(f"{owner}: input {inp.type!r} is defined twice")
            self.inputs[inp.type] = inp

    def lay(self, own: Context) -> None:
        """Lay the bot's context ``own`` over every platform conversation registered (``core.bot.layer``): each
        chat of a platform is then an instance of both."""
        for type_, ctx in list(self.contexts.items()):
            if ctx.conversation and ctx is not own and ctx.laid_over is None:
                laid = layer(ctx, own)
                self.contexts[type_] = laid
                for inp in own.inputs:
                    self.inputs.setdefault(inp.type, inp)

    def resolve(self, context: Context) -> Context:
        """The registered context that serves ``context``: the one laid over it when a bot's context is laid over
        this platform's, else ``context`` itself."""
        registered = self.contexts.get(context.type)
        if registered is not None and registered is not context and registered.includes(context):
            return registered
        return context

    def available(self, state: ContextState) -> tuple[list[Action], list[Output]]:
        """The actions and outputs offered to the model in ``state``'s context."""
        ctx = state.context
        own = (*ctx.actions, *(a for u in state.used for a in u.context.actions)) if state.used else ctx.actions
        actions = [
            a
            for a in (*own, *self.actions)
            if (a.context is None or ctx.includes(a.context) or _used_by(state, a.context))
            and (a.enabled is None or a.enabled(state))
        ]
        if self.action_sources:
            taken = {a.name for a in actions}
            for source in self.action_sources:
                for a in source(state):
                    fits = a.context is None or ctx.includes(a.context)
                    if fits and a.name not in taken and (a.enabled is None or a.enabled(state)):
                        taken.add(a.name)
                        actions.append(a)
        outputs = [
            o
            for o in (*ctx.outputs, *self.outputs)
            if (o.context is None or ctx.includes(o.context)) and (o.enabled is None or o.enabled(state))
        ]
        return actions, outputs

    def installable(self) -> list[Action | Output | Input]:
        """Every action, output and input, each once, though offered in several places (their ``install`` runs
        when the agent starts)."""
        contexts = self.contexts.values()
        everything: tuple[Action | Output | Input, ...] = (
            *self.actions,
            *(a for c in contexts for a in c.actions),
            *self.outputs,
            *(o for c in contexts for o in c.outputs),
            *self.inputs.values(),
        )
        return list({id(d): d for d in everything}.values())


def _check_action(act: Action, owner: str) -> None:
    if act.fire_and_forget is True and call_keys(act.schema).path:
        raise DefinitionError(
            f"{owner}: action {act.name!r} is fire_and_forget=True, so nothing waits for its result, but its schema "
            "declares _outputPath; use fire_and_forget='without_output_path' (only calls that save nothing are "
            "not waited for) or drop _outputPath"
        )


def _used_by(state: ContextState, context: Context) -> bool:
    """True when a run of ``state`` uses ``context`` (``Context.uses``): its actions are offered too."""
    return any(u.context.includes(context) for u in state.used) if state.used else False
