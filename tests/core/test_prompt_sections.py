"""A prompt-section hook (issue 52): a plugin puts what it shows the model in the run's state
(``core.prompt_sections``), and the prompt writes every section in its order, the compact prompt what each gives
it; core/prompt.py names no feature (the facts, the knowledge and the summary are sections like any other)."""

from __future__ import annotations

import ast
from pathlib import Path

from core import InMemoryStore, Plugin, ScriptedModel, context, create_agent, output
from core.definitions import ContextState
from core.entries import InputRef, Log, WorkingMemory
from core.plugin import RunHooks, RunView
from core.prompt import build_compact_prompt, build_prompt
from core.prompt_sections import PromptSection, hide, show

talk = context(type="talk", schema=str, key=lambda s: s)
say = output(type="say", description="A message to the user", handler=lambda d, c, a: None)
REPLY = '<response><output type="say">ok</output></response>'
ROOT = Path(__file__).resolve().parents[2]


class Weather(Plugin):
    """A plugin of an author's: the forecast, shown before every answer (gone once the author says so)."""

    name = "weather"

    def __init__(self) -> None:
        self.forecast = "sunny"

    def begin(self, run: RunView) -> RunHooks:
        plugin = self

        class _Show(RunHooks):
            async def admit(self, updates: list[Log]) -> list[Log]:
                if plugin.forecast:
                    text = f"<weather>{plugin.forecast}</weather>"
                    show(run.state.sections, PromptSection(name="weather", text=text, compact=f"Weather: {text}"))
                else:
                    hide(run.state.sections, "weather")
                return updates

        return _Show()


async def test_a_plugin_adds_a_section_to_the_prompt() -> None:
    model, weather = ScriptedModel(lambda request: REPLY), Weather()
    agent = create_agent(model=model, contexts=[talk], outputs=[say], memory=InMemoryStore(), plugins=[weather])
    async with agent:
        await agent.send(talk, "one", {"type": "talk:message", "data": "hello"})
        weather.forecast = ""
        await agent.send(talk, "one", {"type": "talk:message", "data": "and now?"})
    first, second = (r.system + r.prompt for r in model.requests)
    assert "<weather>sunny</weather>" in first
    assert "<weather>" not in second


def _state(*sections: PromptSection) -> ContextState:
    state = ContextState(id="talk:x", context=talk, args="x", key="x", memory={}, working_memory=WorkingMemory([]))
    for section in sections:
        show(state.sections, section)
    return state


def test_sections_are_written_in_their_order_inside_the_context() -> None:
    state = _state(
        PromptSection(name="late", text="<late/>", order=90),
        PromptSection(name="early", text="<early/>", order=5),
    )
    prompt = build_prompt(state=state, actions=[], outputs=[say], updates=[InputRef(type="m", data="hi")])
    text = prompt.system + prompt.prompt
    assert text.index("<early/>") < text.index("<late/>") < text.index("</context>")


def test_the_compact_prompt_shows_what_each_section_gives_it() -> None:
    state = _state(
        PromptSection(name="facts", text="<facts/>", known=("Ana likes <tea>",)),
        PromptSection(name="notes", text="<notes/>", compact="Notes: bring an umbrella"),
        PromptSection(name="quiet", text="<quiet/>"),
    )
    prompt = build_compact_prompt(state=state, outputs=[say], updates=[InputRef(type="m", data="hi")])
    assert "- Ana likes &lt;tea&gt;" in prompt.system  # (known lines are escaped by the prompt)
    assert "Notes: bring an umbrella" in prompt.system
    assert "<quiet/>" not in prompt.system and "<facts/>" not in prompt.system


def test_prompt_imports_no_feature() -> None:
    tree = ast.parse((ROOT / "core" / "prompt.py").read_text(encoding="utf-8"))
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m.lstrip(".").split(".")[0] in ("facts", "knowledge", "summary")}
    assert "memory.long_memory" not in imported
