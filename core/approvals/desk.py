"""The approvals of one agent: a call whose rule says ``approve`` is stored, not run; its approvers are asked
where its platform's adapter posts the request (buttons); a press (or the timeout) decides it and the decision
reaches the conversation as an input of type ``approval``, through the same path as a message; the process that
runs that input starts the approved call, once, and the model reads its outcome in a new run.

Nothing waits meanwhile: no run stays open and no lease is held. Every change is a compare-and-set in the store
(``core.approvals.store``), so two presses, a press and the timeout, or two workers decide and run a call once.
A decision whose input was not stored (the process died between the two) is sent again by the sweeper of any
process that runs conversations, with the dedupe key ``approval:<id>`` (a copy is dropped by the ingest).

    desk = ApprovalDesk(timeout=600)
    agent = create_agent(..., extensions=[..., desk.extension()], plugins=[TrustGuard(Trust(policy=...))])
    # an adapter: desk.add_asker("telegram", asker) at start; await desk.press(id, approve=True, ...) on a press
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from ..definitions import extension, input, service
from ..entries import ActionCall, InputRef
from ..errors import ConfigError, RunError
from ..handlers import perform_action, prepare_action
from ..prompt import format_value
from ..task_runner import finish_or_cancel
from ..trace import correlation_id
from ..trust import TIER_PARAM, TRUST, ApprovalRequest, AuditEvent, Tier, Verdict, audit
from ..usage import user_of
from .model import APPROVAL_INPUT, Approval, ApprovalStatus, Decision, shorten, valid_id
from .store import ApprovalStore, MemoryApprovalStore

if TYPE_CHECKING:
    from ..definition_types import Action, Extension, Host, Output, Setup
    from ..definitions import ContextState
    from ..handler_context import InputContext
    from ..task_runner import TaskRunner

__all__ = ("ApprovalDesk", "Asker", "DecisionData", "Pressed", "desk_of")

log = logging.getLogger("core.approvals")
content_log = logging.getLogger("content.approvals")
"""What an approved call's failure says (it may quote the arguments), silent unless the operator opts in
(``LOG_CONTENT``)."""

RESULT_CHARS = 4000
"""Characters of a call's result the model reads at most."""


def desk_of(agent: Host) -> ApprovalDesk | None:
    """The approvals of ``agent`` (``ApprovalDesk.extension``, ``agent.provided(ApprovalDesk)``), or None."""
    return agent.provided(ApprovalDesk)


class Asker(Protocol):
    """A platform's side of approvals (each chat adapter registers one with ``ApprovalDesk.add_asker``)."""

    async def ask(self, approval: Approval, *, target: str | None) -> str | None:
        """Post the request with Approve / Deny buttons in its conversation, or in ``target`` (the operator's
        admin chat on this platform) when given; return where it was posted (kept with the approval, for
        ``settle``). Raise when it could not be posted."""
        ...

    async def settle(self, approval: Approval) -> None:
        """Show what became of the request in place of its buttons (best effort)."""
        ...


class Pressed(enum.StrEnum):
    """What a press did."""

    DECIDED = "decided"
    """It decided the request; the conversation is told."""
    NOT_ALLOWED = "not_allowed"
    """The presser may not approve (below the approvers' tier)."""
    ALREADY = "already"
    """The request was decided already (another press, or the timeout)."""
    UNKNOWN = "unknown"
    """No such request (never, or long done)."""


class DecisionData(pydantic.BaseModel):
    """The data of an ``approval`` input."""

    approval: str
    """The approval's id."""
    decision: Decision
    """What was decided."""
    by: str | None = None
    """Who decided (``telegram:7``); None when it timed out."""
    name: str = ""
    """Their display name."""


class _Agent(Protocol):
    """What the desk reads of the agent besides ``Host`` (``core.Agent`` has it)."""

    def available(self, state: ContextState) -> tuple[list[Action[Any]], list[Output[Any, Any]]]: ...

    @property
    def tasks(self) -> TaskRunner: ...


class ApprovalDesk:
    """The approvals of one agent: the ``core.trust.Approvals`` the step loop hands calls to, the presses the
    adapters report, the sweeper that times requests out, and the ``approval`` input that runs approved calls."""

    def __init__(
        self,
        store: ApprovalStore | None = None,
        *,
        timeout: float = 3600.0,
        admin_chats: Mapping[str, str] | None = None,
        approvers: Tier = Tier.ADMIN,
        sweep: bool = True,
        poll: float = 1.0,
        retry: float = 30.0,
        clock: Callable[[], float] = time.time,
        sync: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        """Where the approvals live (None until the agent is known: its memory store)."""
        self.timeout = timeout
        """Seconds a request waits for an approver (``ACTIONS_APPROVAL_TIMEOUT``)."""
        self.admin_chats = dict(admin_chats or {})
        """Per platform, the chat the requests go to (``ACTIONS_APPROVAL_CHATS``); else the conversation's."""
        self.approvers = approvers
        """The lowest tier whose press counts."""
        self.sweep = sweep
        """This process times requests out and sends lost decisions again (a fleet's gateways do not)."""
        self.poll = poll
        """Seconds between two looks at the store at most."""
        self.retry = retry
        """Seconds after which a decision not yet told to its conversation is sent again."""
        self.clock = clock
        """Seconds since the epoch (a fleet's workers: the Redis primary's, as their schedules have it)."""
        self.sync = sync
        """Measures ``clock`` again when that is due (``core.fleet.ServerClock.sync``), at each look at the store."""
        self._askers: dict[str, Asker] = {}
        self._agent: Setup | None = None
        self._loop: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[Any]] = set()
        self._changed = asyncio.Event()

    # -- wiring ------------------------------------------------------------------------------------------

    def extension(self) -> Extension:
        """The extension that installs the desk: the ``approval`` input, the sweeper, ``Trust.approvals``."""
        return extension(
            name="approvals",
            install=self._install,
            inputs=[input(type=APPROVAL_INPUT, schema=DecisionData, handler=self._on_decision, format=_format)],
            services=[service(name="approvals", start=self._start, stop=self._stop)],
        )

    def _install(self, agent: Setup) -> None:
        if self.store is None:
            if agent.distributed:
                raise ConfigError(
                    "approvals of an agent on a shared queue must live in Redis: pass "
                    "store=core.fleet.RedisApprovalStore(backend) to ApprovalDesk"
                )
            self.store = MemoryApprovalStore(agent.memory)
        self._agent = agent
        agent.provide(ApprovalDesk, self)
        trust = agent.provided(TRUST)  # (the TrustGuard plugin's settings; without them nothing needs an approval)
        if trust is not None:
            trust.approvals = self

    @property
    def agent(self) -> Setup:
        if self._agent is None:
            raise ConfigError("this ApprovalDesk is not installed: pass desk.extension() to create_agent")
        return self._agent

    def _store(self) -> ApprovalStore:
        if self.store is None:
            raise ConfigError("this ApprovalDesk is not installed: pass desk.extension() to create_agent")
        return self.store

    def add_asker(self, platform: str, asker: Asker) -> Callable[[], None]:
        """Ask the approvers of ``platform``'s conversations with ``asker``; returns the undo."""
        self._askers[platform] = asker

        def remove() -> None:
            if self._askers.get(platform) is asker:
                del self._askers[platform]

        return remove

    # -- asking (the step loop, in the process running the conversation) ----------------------------------

    async def request(self, request: ApprovalRequest, *, state: ContextState, host: Host) -> Any:
        """``core.trust.Approvals.request``: store the call as pending, post the request; the model reads that
        it waits. A ``RunError`` (the model reads it) when nobody can be asked."""
        platform = request.context_type.partition(":")[0]
        asker = self._askers.get(platform)
        context = host.contexts.get(request.context_type)
        if asker is None or context is None:
            raise RunError(
                f"{request.action!r} was not run: it needs an admin's approval, and approvals cannot be asked from "
                "this conversation; tell the user it cannot be done here"
            )
        now = self.clock()
        approval = Approval(
            id=approval_id(request),
            conversation=request.context_id,
            context=request.context_type,
            args=context.schema.dump(request.args),
            action=request.action,
            address=request.address,
            arguments=request.arguments,
            tier=request.tier,
            user=request.user,
            asker=_name_of(state, request.user),
            correlation_id=request.correlation_id,
            created_at=now,
            expires_at=now + self.timeout,
        )
        store = self._store()
        if not await store.add(approval):  # asked already: the same batch run again (its worker died)
            found = await store.get(approval.id)
            if found is None or found.prompt is not None or found.status is not ApprovalStatus.PENDING:
                return _waiting(approval.id, self.timeout)
            approval = found  # stored, and its worker died before it was posted
        try:
            prompt = await asker.ask(approval, target=self.admin_chats.get(platform))
        except Exception as exc:
            log.warning("%s: could not ask for an approval of %s: %s", approval.conversation, approval.action, exc)
            await store.decide(approval.id, Decision.EXPIRED, by=None, name="", at=now, retry_at=now)
            await store.finish(approval.id, None)
            raise RunError(
                f"{request.action!r} was not run: it needs an admin's approval and the request could not be "
                "posted; tell the user to try again later"
            ) from None
        if prompt is not None:
            noted = await store.set_prompt(approval.id, prompt)
            if noted is not None and noted.status is not ApprovalStatus.PENDING and noted.decided_by is None:
                # it timed out (perhaps its conversation was told already) while it was being posted: the sweeper
                # did not know where, so it is shown here (a press comes from the posted buttons, whose adapter
                # shows it; a decision noted after the prompt is shown by whoever made it)
                await self._settle(noted.model_copy(update={"status": ApprovalStatus.EXPIRED}))
        self._changed.set()
        return _waiting(approval.id, self.timeout)

    # -- deciding (the adapter that received the press; the sweeper) ---------------------------------------

    async def press(
        self,
        approval_id: str,
        *,
        approve: bool,
        by: str,
        name: str,
        tier: Tier,
        asked_here: Callable[[Approval], bool] | None = None,
    ) -> tuple[Pressed, Approval | None]:
        """An approver's press (``by``, of ``tier``, computed by the adapter like a message's author): decide the
        request if they may and it is still pending, and tell its conversation. What the press did, and the
        approval as it stands (None when unknown). ``asked_here``: the adapter's check that the press came from
        where the request was posted (a client may send a button's data from any message, and the presser's tier
        is computed where they pressed); a press from elsewhere is ``UNKNOWN``."""
        store = self._store()
        if not valid_id(approval_id):
            return Pressed.UNKNOWN, None
        if asked_here is not None:
            found = await store.get(approval_id)
            if found is None or not asked_here(found):
                log.info("a press on approval %s by %s came from elsewhere: ignored", approval_id, by)
                return Pressed.UNKNOWN, None
        if not tier.at_least(self.approvers):
            found = await store.get(approval_id)
            log.info(
                "%s: a press on the approval of %s by %s (tier %s) was refused: approvers are %s and above",
                found.conversation if found else "?",
                found.action if found else approval_id,
                by,
                tier.value,
                self.approvers.value,
            )
            return Pressed.NOT_ALLOWED, found
        now = self.clock()
        decision = Decision.APPROVED if approve else Decision.DENIED
        decided = await store.decide(approval_id, decision, by=by, name=name, at=now, retry_at=now + self.retry)
        if decided is None:
            found = await store.get(approval_id)
            return (Pressed.ALREADY if found is not None else Pressed.UNKNOWN), found
        self._audit(decided, AuditEvent.APPROVED if approve else AuditEvent.DENIED, detail=f"by {by} ({tier.value})")
        await self._tell(decided)
        return Pressed.DECIDED, decided

    async def withdraw(self, context_id: str) -> int:
        """``core.trust.Approvals.withdraw``: a Stop in ``context_id`` withdraws its pending requests: each is
        settled at once (never run, its conversation not told: the person stopped that answer) and its posted
        request shows it was withdrawn. A store that fails is logged: the requests then expire as usual."""
        store, now = self._store(), self.clock()
        try:
            found = await store.pending(context_id)
        except RunError as exc:
            log.warning("%s: pending approvals not withdrawn on Stop: %s", context_id, exc)
            return 0
        withdrawn = 0
        for approval in found:
            try:
                decided = await store.decide(
                    approval.id, Decision.WITHDRAWN, by=None, name="", at=now, retry_at=now + self.retry
                )
                if decided is None:  # decided meanwhile (a press): it goes its way
                    continue
                await store.finish(approval.id, {"error": _WITHDRAWN})
            except RunError as exc:
                log.warning("%s: approval %s not withdrawn on Stop: %s", context_id, approval.id, exc)
                continue
            withdrawn += 1
            self._audit(decided, AuditEvent.DENIED, detail="withdrawn: the person stopped the answer")
            await self._settle(decided)
        if withdrawn:
            log.info("%s: Stop withdrew %d pending approval(s)", context_id, withdrawn)
        return withdrawn

    def _audit(self, approval: Approval, event: AuditEvent, *, detail: str = "") -> None:
        token = correlation_id.set(approval.correlation_id)
        try:
            audit(
                self.agent.observe,
                event,
                context_id=approval.conversation,
                tier=approval.tier,
                action=approval.action,
                detail=detail,
            )
        finally:
            correlation_id.reset(token)

    async def _tell(self, approval: Approval) -> None:
        """Send the decision to its conversation (embedded: in a task the desk owns, the run may take a while;
        a failure is retried by the sweeper)."""
        agent = self.agent
        decision = approval.decision
        context = agent.contexts.get(approval.context)
        if context is None or decision is None:
            log.warning(
                "%s: approval %s cannot be told here (no %s context)",
                approval.conversation,
                approval.id,
                approval.context,
            )
            return
        ref = InputRef(
            type=APPROVAL_INPUT,
            data=DecisionData(
                approval=approval.id, decision=decision, by=approval.decided_by, name=approval.decider
            ).model_dump(mode="json"),
            params={"user": "approvals", "approval_id": approval.id, TIER_PARAM: approval.tier.value},
            correlation_id=f"approval:{approval.id}",  # its own: a call its run asks approval for is a new one
        )

        async def send() -> None:
            token = correlation_id.set(ref.correlation_id)
            try:
                await agent.send(context, approval.args, ref, dedupe_key=f"approval:{approval.id}")
            except Exception as exc:
                log.warning(
                    "%s: the decision on approval %s was not delivered (%s); trying again in %gs",
                    approval.conversation,
                    approval.id,
                    exc,
                    self.retry,
                )
            finally:
                correlation_id.reset(token)

        if agent.distributed:
            await send()  # returns once stored
            return
        task = asyncio.get_running_loop().create_task(send(), name=f"approval:{approval.id}")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def sweep_once(self) -> int:
        """Time out the pending requests past their timeout and send again the decisions not yet told; how many
        were looked at."""
        store, now = self._store(), self.clock()
        found = await store.due(now, limit=100)
        for approval in found:
            if approval.status is ApprovalStatus.PENDING:
                expired = await store.decide(
                    approval.id, Decision.EXPIRED, by=None, name="", at=now, retry_at=now + self.retry
                )
                if expired is None:
                    continue
                self._audit(expired, AuditEvent.EXPIRED, detail=f"nobody answered in {self.timeout:g}s")
                await self._settle(expired)
                await self._tell(expired)
            elif approval.status is ApprovalStatus.DONE:
                await store.finish(approval.id, approval.outcome)
            else:
                await store.retry_at(approval.id, now + self.retry)
                if approval.status is ApprovalStatus.RUNNING:  # its worker died while the call ran
                    await store.finish(approval.id, {"error": _INTERRUPTED})
                    approval = approval.model_copy(update={"status": ApprovalStatus.APPROVED})
                await self._tell(approval)
        return len(found)

    async def _settle(self, approval: Approval) -> None:
        asker = self._askers.get(approval.platform)
        if asker is None or approval.prompt is None:
            return
        try:
            await asker.settle(approval)
        except Exception as exc:
            log.warning("%s: could not show that approval %s expired: %s", approval.conversation, approval.id, exc)

    # -- running (the process running the conversation, as the ``approval`` input is prepared) -----------------

    async def _on_decision(self, data: Any, ctx: InputContext, host: Host) -> dict[str, Any]:
        """The ``approval`` input's handler: start the approved call (once: a batch delivered again finds its
        outcome), and put the outcome in the input's data for the model."""
        store = self._store()
        news = DecisionData.model_validate(data)
        found = await store.get(news.approval)
        out: dict[str, Any] = news.model_dump(mode="json")
        if found is None:
            out["outcome"] = {"error": "this approval is not known any more"}
            return out
        out["action"] = found.action
        if found.status is ApprovalStatus.APPROVED:
            started = await store.start(found.id)
            if started is not None:
                ran = await self._run_call(started, ctx.state, host)
                await store.finish(found.id, ran)
                out["outcome"] = ran
                return out
            found = await store.get(found.id) or found
        if found.status is ApprovalStatus.RUNNING:
            outcome: dict[str, Any] | None = {"error": _INTERRUPTED}
            await store.finish(found.id, outcome)
        elif found.status is ApprovalStatus.DONE:
            outcome = found.outcome
        else:
            outcome = None
            await store.finish(found.id, None)
        if news.decision is Decision.APPROVED:
            out["outcome"] = outcome
        return out

    async def _run_call(self, approval: Approval, state: ContextState, host: Host) -> dict[str, Any]:
        """Run the approved call as the step loop would have: its arguments resolved and validated again, its
        handler in the task runner. Its outcome (``result`` as text, or ``error``)."""
        agent: _Agent = host  # type: ignore[assignment]  # core.Agent; tests may give a stand-in with both
        trust = host.provided(TRUST)
        if trust is not None and trust.policy.verdict(approval.address, approval.tier) is Verdict.REFUSE:
            return {"error": f"{approval.action!r} may no longer be called here (the policy changed): not run"}
        actions, _ = agent.available(state)
        action = next((a for a in actions if a.name == approval.action), None)
        if action is None:
            return {"error": f"{approval.action!r} is not available now (its server may be down): not run"}
        call = ActionCall(name=approval.action, content=approval.arguments, processed=True)
        token = correlation_id.set(approval.correlation_id)
        try:
            checked = await prepare_action(host=host, state=state, action=action, call=call, slots=[], index=0)
            result, text, _ = await perform_action(checked, host=host, tasks=agent.tasks)
        except RunError as exc:  # its text often quotes the arguments: logged only with LOG_CONTENT
            log.info(
                "%s: the approved call of %s failed (%s)", approval.conversation, approval.action, type(exc).__name__
            )
            content_log.info("%s: the approved call of %s failed: %s", approval.conversation, approval.action, exc)
            return {"error": str(exc)}
        except Exception as exc:
            log.exception("the approved call of %s failed inside the framework", approval.action)
            return {"error": f"internal error: {type(exc).__name__}"}
        finally:
            correlation_id.reset(token)
        log.info("%s: the approved call of %s ran", approval.conversation, approval.action)
        shown = text if text is not None else format_value(result)
        return {"result": shorten_result(shown)}

    # -- the sweeper ---------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._changed.clear()
            wait = self.poll
            try:
                if self.sync is not None:
                    await self.sync()
                if self.agent.running:
                    await self.sweep_once()
                soonest = await self._store().next_due()
                if soonest is not None:
                    wait = max(0.05, min(wait, soonest - self.clock()))
            except Exception as exc:  # the store is down (Redis restarting): look again later
                log.warning("approvals: %s; trying again in %gs", exc, self.poll)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._changed.wait()

    async def _start(self, _agent: Setup) -> None:
        if self.sweep and self._loop is None:
            self._loop = asyncio.get_running_loop().create_task(self._run(), name="approvals")

    async def _stop(self, agent: Setup) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
        await finish_or_cancel(list(self._sending), agent.stop_timeout)


_INTERRUPTED = "the bot restarted while the call ran: whether it had its effect is not known"
_WITHDRAWN = "withdrawn: the person stopped the answer that asked for it; it was not run"


def approval_id(request: ApprovalRequest) -> str:
    """The id of the approval of ``request``: the same for the same call caused by the same message in the same
    conversation (a batch run again after its worker died asks once), else the call's id."""
    if request.correlation_id is None:
        return request.call_id
    seed = "\n".join((request.context_id, request.correlation_id, request.action, request.arguments))
    return hashlib.sha256(seed.encode()).hexdigest()[:24]


def _name_of(state: ContextState, user: str | None) -> str:
    """The display name of ``user`` as their newest input in the conversation gives it (``@username`` first)."""
    if user is None:
        return ""
    for entry in reversed(state.working_memory.logs):
        if isinstance(entry, InputRef) and user_of(entry) == user:
            username = entry.params.get("username")
            name = f"@{username}" if username else entry.params.get("user") or entry.params.get("author") or ""
            return shorten(name, 60)
    return ""


def _waiting(approval: str, timeout: float) -> dict[str, Any]:
    """What the model reads of a call that waits."""
    return {
        "status": "waiting for an admin's approval",
        "approval_id": approval,
        "expires_in_minutes": round(timeout / 60, 1),
        "note": (
            "the call was not run: the chat's admins were asked to approve it. Tell the user it waits for an "
            "admin's approval; you will be told the outcome. Do not call it again."
        ),
    }


def shorten_result(text: str) -> str:
    """A call's result as the model reads it: at most ``RESULT_CHARS`` characters."""
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"


def _format(ref: InputRef) -> str:
    """How an ``approval`` input reads in the prompt."""
    data = ref.data if isinstance(ref.data, dict) else {}
    action = str(data.get("action") or "the action")
    who = shorten(str(data.get("name") or data.get("by") or "an admin"), 60)
    decision = data.get("decision")
    if decision == Decision.DENIED.value:
        return (
            f"An admin ({who}) denied the call of {action} you asked approval for: it was not run. Tell the user; "
            "do not call it again unless they ask anew."
        )
    if decision == Decision.EXPIRED.value:
        return (
            f"Nobody approved the call of {action} you asked approval for in time: it expired and was not run. "
            "Tell the user."
        )
    outcome = data.get("outcome") or {}
    if "result" in outcome:
        return (
            f"An admin ({who}) approved the call of {action} you asked approval for; it ran and returned: "
            f"{outcome['result']}\nTell the user the outcome."
        )
    error = outcome.get("error", "no outcome was recorded")
    return f"An admin ({who}) approved the call of {action}, and it failed: {error}\nTell the user."
