"""What the approval tests of both platforms share: the test MCP server's ``open_ticket`` marked ``approve`` (its
calls written to a file), the desk, and a scripted model that calls it and says what it is told."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import Extension, ModelRequest, ScriptedModel
from core.approvals import ApprovalDesk
from core.testing import updates_of
from core.trust import ActionsPolicy, Trust
from extensions.mcp import McpSettings, mcp_toolset
from tests.mcp.support import logged_config

__all__ = ("POLICY", "approval_extensions", "approval_model", "approval_options")

POLICY = "mcp:*:open_ticket=member/approve"
"""Members may open a ticket once an admin approved it."""
_RESULT = re.compile(r"<action_result [^>]*>(.*?)</action_result>", re.S)


def approval_extensions(calls: Path, **desk: Any) -> list[Extension]:
    """The test MCP server's tools (each call it gets written to ``calls``) and an ``ApprovalDesk(**desk)``."""
    tools = mcp_toolset(McpSettings(servers=json.dumps([logged_config(calls)]))).extension()
    return [tools, ApprovalDesk(**desk).extension()]


def approval_options() -> dict[str, Any]:
    """The agent options that apply ``POLICY``."""
    return {"trust": Trust(policy=ActionsPolicy.parse(POLICY))}


def approval_model(say: Callable[[str], str], *, title: str, waiting: Callable[[str], str]) -> ScriptedModel:
    """Calls ``tools:open_ticket`` with ``title`` for a message; says ``waiting(result)`` when the call's result
    comes back (it waits); says what an approval input reports: ``approved, <the result>``, ``an admin denied
    it``, ``nobody approved it in time``. ``say`` writes the platform's message output."""

    def reply(request: ModelRequest) -> str:
        updates = updates_of(request.prompt)
        if ran := re.search(r"it ran and returned: ([^\n<]*)", updates):
            return say("approved, " + ran[1].strip())
        if "denied the call" in updates:
            return say("an admin denied it")
        if "it expired" in updates:
            return say("nobody approved it in time")
        results = _RESULT.findall(updates)
        if results:
            return say(waiting(results[-1]))
        call = json.dumps({"title": title})
        return f'<response><action_call name="tools:open_ticket">{call}</action_call></response>'

    return ScriptedModel(reply)
