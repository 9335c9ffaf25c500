"""Every call of a public constructor shown to a reader (a docstring, an error message, the docs, the README) names
only arguments the constructor takes (issue 47: errors told authors to fix ``create_agent(template=...)``, docstrings
showed ``create_agent(trust=...)``, the fidelity table ``create_agent(intro=...)``, none of which exist). The text is
read with ``ast`` (every string of core/, bots/ and extensions/, error messages and f-strings included) and each
shown call's keywords are bound to the real signature with ``inspect.signature``."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core import AgentOptions, Bot, LoopGuard, ScriptedModel, action, context, extension, output, service
from core.agent import Agent
from core.approvals import ApprovalDesk
from core.prompt import PromptTemplate
from core.testing import StandInChat
from core.trust import Trust
from core.trust.plugin import TrustGuard

ROOT = Path(__file__).resolve().parents[2]

PUBLIC: dict[str, Callable[..., Any]] = {
    "create_agent": Agent,
    "Agent": Agent,
    "Bot": Bot,
    "AgentOptions": AgentOptions,
    "PromptTemplate": PromptTemplate,
    "context": context,
    "action": action,
    "output": output,
    "extension": extension,
    "service": service,
    "ScriptedModel": ScriptedModel,
    "LoopGuard": LoopGuard,
    "Trust": Trust,
    "TrustGuard": TrustGuard,
    "ApprovalDesk": ApprovalDesk,
    "StandInChat": StandInChat,
}
"""The public constructors a bot author calls, by the name the docs show them under."""

OLD_FORMS = {("docs/how-to/upgrading.md", "create_agent", "persona")}
"""Calls shown on purpose in their old form, beside what they become (the upgrading guide)."""

CALL = re.compile(r"(?<![\w.])(?:core\.)?(" + "|".join(PUBLIC) + r")\(")
KEYWORD = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")


def _arguments(text: str, start: int) -> str | None:
    """What stands between the parenthesis at ``start`` and its match (None: unmatched within 800 characters)."""
    depth = 0
    for index in range(start, min(len(text), start + 800)):
        char = text[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : index]
    return None


def _top_level(arguments: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in arguments:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def shown_calls(text: str) -> Iterator[tuple[str, list[str], int]]:
    """Each call of ``PUBLIC`` shown in ``text``: its name, its keywords and its offset."""
    for found in CALL.finditer(text):
        before = text[max(0, found.start() - 6) : found.start()]
        if before.endswith(("def ", "class ")):
            continue
        arguments = _arguments(text, found.end() - 1)
        if arguments is None:
            continue
        keywords = [m[1] for part in _top_level(arguments) if (m := KEYWORD.match(part))]
        yield found[1], keywords, found.start()


def unknown_keywords(name: str, keywords: list[str]) -> list[str]:
    signature = inspect.signature(PUBLIC[name])
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return []
    return [k for k in keywords if k not in signature.parameters]


def texts() -> Iterator[tuple[str, int, str]]:
    """Every text a reader is shown: (file, line, text)."""
    for folder in ("core", "bots", "extensions"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    yield str(path.relative_to(ROOT)), node.lineno, node.value
                elif isinstance(node, ast.JoinedStr):  # an f-string: as written (placeholders and all)
                    yield str(path.relative_to(ROOT)), node.lineno, ast.get_source_segment(source, node) or ""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        yield str(path.relative_to(ROOT)), 1, path.read_text(encoding="utf-8")


def test_every_shown_call_of_a_public_constructor_names_only_its_real_arguments() -> None:
    wrong: list[str] = []
    checked = 0
    for where, line, text in texts():
        for name, keywords, offset in shown_calls(text):
            checked += 1
            for keyword in unknown_keywords(name, keywords):
                if (where, name, keyword) in OLD_FORMS:
                    continue
                at = line + text.count("\n", 0, offset)
                wrong.append(f"{where}:{at}: {name}({keyword}=...) is not an argument of {name}")
    assert checked > 100, f"only {checked} calls found: is the search broken?"
    assert wrong == [], "\n".join(wrong)


def test_the_check_finds_a_wrong_argument() -> None:
    text = "Fix it in ``create_agent(template=...)``; or Bot(name='x', trust=Trust()) and AgentOptions(intro='hi')."
    found = {(name, k) for name, kws, _ in shown_calls(text) for k in unknown_keywords(name, kws)}
    assert found == {("create_agent", "template"), ("Bot", "trust")}
