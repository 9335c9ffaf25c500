"""The ``run_code`` action: a short program run in the sandbox (``core.sandbox.runner``), offered only to the trust
tiers the operator names, and only where a sandbox works (``CodeSandbox.start`` checks it once; until it has, and
when it failed, the action is not offered).

A run acts with the least trusted tier among the authors of its inputs (as ``core.trust`` reads it): one guest's
message in a batch of an owner's hides the action for the whole run. The program's output is data: the model reads
it as the action's result, escaped like every result.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..definitions import action, extension, service
from ..plugin import Plugin, RunHooks
from ..trust.tiers import Tier, tier_of
from .runner import Language, Sandbox, SandboxLimits

if TYPE_CHECKING:
    from ..definition_types import Action, ActionContext, Extension, Host
    from ..entries import InputRef
    from ..plugin import RunView

__all__ = ("RUN_CODE", "CodeSandbox", "RunCodeArgs")

log = logging.getLogger("core.sandbox")

RUN_CODE = "run_code"
"""The action's name."""


class RunCodeArgs(BaseModel):
    """Arguments of ``run_code``."""

    code: str = Field(min_length=1, max_length=20_000, description="The whole program")
    language: Language = Field(default="python", description="python (3) or sh")


class CodeSandbox(Plugin):
    """``run_code`` for the runs whose authors are all of ``tiers``, in ``sandbox`` within ``limits``; with no
    ``sandbox`` (None: none on this machine) the action is never offered."""

    name = "sandbox"

    def __init__(
        self,
        sandbox: Sandbox | None,
        *,
        tiers: frozenset[Tier] = frozenset({Tier.OWNER}),
        limits: SandboxLimits | None = None,
        owners: frozenset[str] = frozenset(),
    ) -> None:
        self.sandbox = sandbox
        self.tiers = tiers
        """The tiers offered the action."""
        self.limits = limits or SandboxLimits()
        self.owners = owners
        """The operator's users (``BOT_ADMIN_USERS``): their inputs count as the owner's."""
        self.why_not: str | None = None if sandbox is not None else "no sandbox on this machine"
        """Why the action is not offered (None: it is, to ``tiers``)."""
        self.checked = sandbox is None

    async def start(self, _host: Host) -> None:
        """Check once that a program runs here (a container without user namespaces cannot)."""
        if self.sandbox is None or self.checked:
            return
        self.why_not = await self.sandbox.check()
        self.checked = True
        if self.why_not is not None:
            log.warning("run_code is not offered: %s", self.why_not)

    def extension(self) -> Extension:
        runs = action(
            name=RUN_CODE,
            description="Runs a short program (Python 3 or sh) in a sandbox: no network, no files of the bot, a "
            "fresh folder, a few seconds and a few hundred MB; returns its exit code, output and errors.",
            instructions="Use it to compute, test or check something with code. Print what you need to read.",
            schema=RunCodeArgs,
            handler=self._run,
        )
        check = service(name="sandbox-check", start=self.start)
        return extension(name="sandbox", actions=[runs], services=[check])

    async def _run(self, args: RunCodeArgs, ctx: ActionContext, agent: Host) -> dict[str, Any]:
        if self.sandbox is None or self.why_not is not None:
            raise RuntimeError(f"no sandbox here: {self.why_not}")
        result = await self.sandbox.run(args.code, language=args.language, limits=self.limits)
        log.info(
            "run_code in %s: exit %s%s",
            ctx.state.id,
            result.exit_code,
            f", {result.stopped}" if result.stopped else "",
        )
        return result.as_dict()

    def begin(self, run: RunView) -> RunHooks:
        return _Offered(self)


class _Offered(RunHooks):
    __slots__ = ("plugin", "tier")

    def __init__(self, plugin: CodeSandbox) -> None:
        self.plugin = plugin
        self.tier: Tier | None = None

    def joined(self, ref: InputRef) -> None:
        tier = tier_of(ref, owners=self.plugin.owners)
        if self.tier is None or not tier.at_least(self.tier):
            self.tier = tier

    def offer(self, actions: list[Action[Any]]) -> list[Action[Any]]:
        plugin = self.plugin
        if plugin.why_not is None and plugin.checked and self.tier in plugin.tiers:
            return actions
        return [a for a in actions if a.name != RUN_CODE]
