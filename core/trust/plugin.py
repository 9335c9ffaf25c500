"""The trust plugin: a run acts with the tier of the least trusted author of its inputs; each step offers the
model only the actions that tier may call; a call it may not make never runs (the model reads why, the call is
audited, the user is told once per action and run); a call whose rule says ``approve`` is handed to the approvals
(``Trust.approvals``) instead of running."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..entries import InputRef
from ..errors import RunError
from ..plugin import CallGate, Plugin, RunHooks, RunView
from ..trace import correlation_id
from ..usage import user_of
from .approvals import ApprovalRequest
from .audit import AuditEvent, audit
from .guard import TRUST, RunGuard, Trust
from .policy import Verdict, address_of

if TYPE_CHECKING:
    from ..definition_types import Action, Setup
    from .tiers import Tier

__all__ = ("TrustGuard",)

log = logging.getLogger("core.trust")


class TrustGuard(Plugin):
    """Enforces ``trust`` (tiers, the operator's policy, approvals) in every run."""

    name = "trust"
    after = ("loop-guard",)  # (a repeated call is refused as a repeat before a tier or an approval sees it)

    def __init__(self, trust: Trust) -> None:
        self.trust = trust
        """The trust settings; the approvals desk fills in their ``approvals`` (``Trust.approvals``)."""

    def attach(self, host: Setup) -> None:
        host.provide(TRUST, self.trust)

    def begin(self, run: RunView) -> RunHooks:
        return _Guarded(self.trust, run)


class _Guarded(RunHooks):
    __slots__ = ("guard", "run")

    def __init__(self, trust: Trust, run: RunView) -> None:
        self.guard = RunGuard(trust)
        self.run = run

    def joined(self, ref: InputRef) -> None:
        self.guard.admit(ref)

    def offer(self, actions: list[Action[Any]]) -> list[Action[Any]]:
        return self.guard.offered(actions)

    def gate(self, gate: CallGate) -> None:
        guard = self.guard
        if gate.action is None:
            hidden = guard.hidden.get(gate.name)
            if hidden is not None:
                self._refuse(gate, needed=hidden.tier)
        elif guard.verdict(gate.action) is Verdict.APPROVE:
            gate.answer(self._ask(gate, gate.action))

    def _observe(self) -> Callable[[str, str, float], None]:
        run = self.run
        return lambda kind, _context_id, value: run.observe(kind, value)

    def _refuse(self, gate: CallGate, *, needed: Tier | None) -> None:
        """A call of an action the run's tier may not call: it never runs; the model reads why, the call is audited,
        and the user is told once per action and run (in the chat's language)."""
        guard, run, name = self.guard, self.run, gate.name
        tier = guard.acting
        audit(
            self._observe(),
            AuditEvent.REFUSED,
            context_id=run.state.id,
            tier=tier,
            action=name,
            arguments=gate.call.content,
            detail=f"needs {needed.value}" if needed is not None else "nobody may call it",
        )
        who = "nobody here" if needed is None else f"the {needed.value} tier or above"
        gate.refuse(
            f"{name!r} was not run: it is reserved to {who}, and the person you are answering is {tier.value}; "
            "tell them you may not do this for them, and do not call it again"
        )
        if name not in guard.notified:
            guard.notified.add(name)
            run.spawn(self._tell(guard.trust.notice(run.state.chat.language, name, tier, needed)))

    async def _tell(self, text: str) -> None:
        try:
            await self.run.say(text)
        except Exception as exc:
            log.warning("%s: could not tell the user a call was refused: %s", self.run.state.id, exc)

    def _ask(self, gate: CallGate, action: Action[Any]) -> Awaitable[Any]:
        """A call whose rule says ``approve``: its arguments are checked, then it is handed to the approvals, whose
        answer is the result the model reads now; the call does not run in this run. Without approvals set up, it
        is refused."""
        guard, run = self.guard, self.run
        tier = guard.acting
        approvals = guard.trust.approvals
        arguments = gate.call.content

        async def ask() -> Any:
            if approvals is None:
                audit(
                    self._observe(),
                    AuditEvent.REFUSED,
                    context_id=run.state.id,
                    tier=tier,
                    action=action.name,
                    arguments=arguments,
                    detail="needs an approval, and no approvals are set up",
                )
                raise RunError(
                    f"{action.name!r} was not run: it needs an approval by an admin, and approvals are not set up "
                    "on this bot; tell the user it cannot be done here"
                )
            parsed = await gate.check()
            asker = next((user_of(e) for e in reversed(run.chain) if isinstance(e, InputRef) and user_of(e)), None)
            request = ApprovalRequest(
                call_id=gate.call.id,
                context_id=run.state.id,
                context_type=run.state.context.type,
                args=run.state.platform_args,
                action=action.name,
                address=address_of(action),
                arguments=arguments,
                parsed=parsed,
                tier=tier,
                user=asker,
                correlation_id=correlation_id.get(),
            )
            result = await approvals.request(request, state=run.state, host=run.host)
            audit(
                self._observe(),
                AuditEvent.APPROVAL_REQUESTED,
                context_id=run.state.id,
                tier=tier,
                action=action.name,
                arguments=arguments,
            )
            return result

        return ask()
