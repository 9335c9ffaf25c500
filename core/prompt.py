"""Prompt building: the sections and XML of the Prompting seed.

The template (``PromptTemplate``) arranges the sections the seed names: ``{{intro}}``, ``{{instructions}}``,
``{{response}}``, ``{{content}}`` and ``{{footer}}`` (and ``{{persona}}``, who the bot is, after the intro). The seed
puts the response format and the footer after the content; the default template puts them before, with the other
texts that never change, so that a provider's prompt cache reads the whole static beginning and the prompt ends with
the one line that changes at every request, ``<updates count="N"/>`` (issue 51; docs/fidelity.md, P1). A bot
author may replace any of them and the template itself
(``create_agent(options=AgentOptions(template=..., instructions=...))``). The content is made of five parts
generated at every step, which a template may also place one by one: ``{{actions}}`` (the available actions),
``{{outputs}}`` (the available outputs), ``{{contexts}}``, ``{{workingMemory}}`` (a bounded window of it, and the
new entries last) and ``{{updates}}`` (how many of its last entries are new: ``build_prompt``); ``{{content}}``
holds those the template does not place itself. What comes before the first of them is the system part, the same
on every step; from there on is the prompt part (a template that places none of them: the content opens the prompt
part). Building a prompt reads only the window, so it costs the same after 10 or 100,000 messages.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .definitions import Action, ContextState, Output
from .entries import ActionCall, ActionResult, ErrorLog, EventRef, InputRef, Log, OutputRef, Thought, WorkingMemory
from .errors import DefinitionError, RunError
from .escape import escape_attr, escape_text
from .media.attachment import Loaded, describe, format_attachments, loaded_of
from .models.base import ToolSpec
from .prompt_sections import PromptSection

__all__ = (
    "DEFAULT_INTRO",
    "DEFAULT_TEMPLATE",
    "FOOTER",
    "INSTRUCTIONS",
    "PARTS",
    "RESPONSE_FORMAT",
    "SEED_TEMPLATE",
    "TEMPLATE",
    "Prompt",
    "PromptTemplate",
    "build_compact_prompt",
    "build_prompt",
    "compact_tools",
    "format_action",
    "format_log",
    "format_output",
    "format_value",
    "output_tools",
    "quiet_params",
    "reply_output",
    "xml_attr",
)

DEFAULT_INTRO = (
    "You are an AI agent. You read updates (new messages and the results of your actions), think, "
    "call actions when you need information or to change something, and answer through outputs."
)

INSTRUCTIONS = """\
How to handle the updates:
1. <working-memory> is this conversation, oldest first. Its last N entries (<updates count="N"/>) are new:
   inputs from users and results of the actions you called.
2. Use the entries before them and <contexts> for what happened earlier.
3. Think in <reasoning>, briefly.
4. Call an action with <action_call> when you need its result or its effect. You will see its result
   in the next step, so do not guess results.
5. Answer the user with an <output> of one of the available types. Each <output> is delivered as
   soon as its tag closes. Do not answer the same input twice.
6. If an update is an error about something you wrote, fix it and try again."""

RESPONSE_FORMAT = """\
Answer with exactly this structure and nothing else:
<response>
  <reasoning>your short reasoning</reasoning>
  <action_call name="ACTION_NAME">{"argument": "value"}</action_call>
  <output type="OUTPUT_TYPE" attribute="value">content</output>
</response>
- <action_call> and <output> are optional and may repeat; use only the available names and types.
- Action arguments are JSON matching the action's schema. Output content matches its content schema;
  attributes match its attributes schema.
- An argument or output may use the result of an earlier call of the same response:
  {{calls[0].field}} is replaced by the field of the first call's result.
- When an action's schema has "_outputPath", its result is saved at that path of the state
  (for example "_outputPath": "†state.user.summary"; add "_outputMethod": "merge" or "push" to combine
  with what is there). A later argument written as "†state.user.summary" receives the saved value.
  <state> in <contexts> shows what is saved."""

INSTRUCTIONS_WITHOUT_ACTIONS = """\
How to handle the updates:
1. <working-memory> is this conversation, oldest first. Its last N entries (<updates count="N"/>) are new:
   inputs from users.
2. Use the entries before them and <contexts> for what happened earlier.
3. Think in <reasoning>, briefly.
4. Answer the user with an <output> of one of the available types. Each <output> is delivered as
   soon as its tag closes. Do not answer the same input twice.
5. If an update is an error about something you wrote, fix it and try again."""
"""``INSTRUCTIONS`` for a step that offers no action: nothing about calling one."""

RESPONSE_FORMAT_WITHOUT_ACTIONS = """\
Answer with exactly this structure and nothing else:
<response>
  <reasoning>your short reasoning</reasoning>
  <output type="OUTPUT_TYPE" attribute="value">content</output>
</response>
- <output> may repeat; use only the available types. Output content matches its content schema;
  attributes match its attributes schema."""
"""``RESPONSE_FORMAT`` for a step that offers no action: no action syntax."""

FOOTER = "Keep answers useful and concise. Never invent action results."

XML_CALL_FORMAT = (
    "xml: write the arguments as XML elements, one per argument (&lt;city&gt;Paris&lt;/city&gt;), not as JSON; "
    "an object's fields are elements inside its element, a list repeats its element"
)
"""What an action that takes XML arguments tells the model (``call_format="xml"``)."""

TEMPLATE = "{{intro}}\n\n{{persona}}\n\n{{instructions}}\n\n{{response}}\n\n{{footer}}\n\n{{content}}"
"""The default template: the intro (and persona), the instructions, the response format and the footer are the system
part, the same at every step and in every conversation of a bot (a prefix a provider caches); the content the prompt
part, ending with ``<updates count="N"/>``, the one line that changes at every request. The Prompting seed's order
but for the response format and the footer, which it puts after the content (the seed's order is
``SEED_TEMPLATE``)."""
SEED_TEMPLATE = "{{intro}}\n\n{{persona}}\n\n{{instructions}}\n\n{{content}}\n\n{{response}}\n\n{{footer}}"
"""The Prompting seed's order (``AgentOptions(template=SEED_TEMPLATE)``): the response format after the content, so
only the intro and the instructions are the system part."""

PARTS = ("actions", "outputs", "contexts", "workingMemory", "updates")
"""The parts of the content, in the order ``{{content}}`` shows them; a template may place each on its own."""
SECTIONS = ("intro", "persona", "instructions", "content", "response", "footer", *PARTS)
"""The placeholders a template may use."""
_GENERATED = frozenset(("content", *PARTS))
"""The placeholders filled anew at every step (the first of them starts the prompt part)."""

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")


@dataclass(frozen=True, kw_only=True)
class PromptTemplate:
    """The static parts of the prompt and how they are arranged (the seed's ``mainPrompt``); every field may be
    replaced (``AgentOptions(intro=..., instructions=..., response=..., footer=..., template=...)``, given as
    ``create_agent(options=...)``).

    A section left empty takes its paragraph with it: in the default template, no persona leaves no blank
    lines. A template without ``{{persona}}`` leaves the persona out, a conversation's ``/persona`` too."""

    template: str = TEMPLATE
    """Where the sections go: ``{{intro}}``, ``{{persona}}``, ``{{instructions}}``, ``{{content}}``,
    ``{{response}}``, ``{{footer}}``, and the content's parts ``{{actions}}``, ``{{outputs}}``, ``{{contexts}}``,
    ``{{workingMemory}}``, ``{{updates}}`` where they are placed apart (``{{content}}`` holds the others). Before
    the first of the generated ones is the system part; from there on the prompt part (a template with none of
    them: the content opens the prompt part)."""
    intro: str = DEFAULT_INTRO
    """What the agent is and does."""
    instructions: str = INSTRUCTIONS
    """How to handle the updates, step by step."""
    response: str = RESPONSE_FORMAT
    """The structure of the expected ``<response>``."""
    footer: str = FOOTER
    """Final reminders."""

    def __post_init__(self) -> None:
        for name, value in (
            ("template", self.template),
            ("intro", self.intro),
            ("instructions", self.instructions),
            ("response", self.response),
            ("footer", self.footer),
        ):
            if not isinstance(value, str):
                raise DefinitionError(f"AgentOptions({name}=...) must be a string, got {type(value).__name__}")
        found = _PLACEHOLDER.findall(self.template)
        unknown = sorted({name for name in found if name not in SECTIONS})
        if unknown:
            known = ", ".join("{{" + name + "}}" for name in SECTIONS)
            raise DefinitionError(
                f"AgentOptions(template=...): unknown placeholder {', '.join('{{' + n + '}}' for n in unknown)}; "
                f"a template may use {known}"
            )
        twice = sorted({name for name in found if name in _GENERATED and found.count(name) > 1})
        if twice:
            raise DefinitionError(
                f"AgentOptions(template=...): {', '.join('{{' + n + '}}' for n in twice)} may appear once"
            )

    def render(self, *, persona: str = "", content: str | Mapping[str, str]) -> tuple[str, str]:
        """``(system, prompt)``: the template with its sections and the content in place. ``content``: the text
        of each part (``PARTS``), or the whole content as one text, shown where ``{{content}}`` is."""
        system, pieces = _arrange(self, persona)
        if len(pieces) == 3:  # the content in one place, as in the default template: no part placed apart
            if not isinstance(content, str):
                content = "\n\n".join([content[name] for name in PARTS if content.get(name)])
            return system, (content + pieces[2]).strip("\n")
        if isinstance(content, str):
            parts: Mapping[str, str] = {}
            whole = content
        else:
            parts = content
            placed = pieces[1::2]
            whole = "\n\n".join(parts[name] for name in PARTS if name not in placed and parts.get(name))
        filled = [
            piece if i % 2 == 0 else whole if piece == "content" else parts.get(piece, "")
            for i, piece in enumerate(pieces)
        ]
        return system, "".join(filled).strip("\n")


DEFAULT_TEMPLATE = PromptTemplate()
"""The prompt as the framework writes it."""


@functools.lru_cache(maxsize=256)
def _arrange(template: PromptTemplate, persona: str) -> tuple[str, tuple[str, ...]]:
    """The system part, and the prompt part as pieces: the template's own text (its sections in place) at even
    indexes, the name of a generated placeholder at odd ones (once per persona). The parts the template does not
    place, when it has no ``{{content}}`` for them, open the prompt part."""
    values = {
        name: value.replace("\x00", "")  # the marker of a generated placeholder below
        for name, value in (
            ("intro", template.intro),
            ("persona", persona),
            ("instructions", template.instructions),
            ("response", template.response),
            ("footer", template.footer),
        )
    }
    marked = _PLACEHOLDER.sub(
        lambda m: f"\x00{m.group(1)}\x00" if m.group(1) in _GENERATED else m.group(0), template.template
    )
    system, *pieces = _fill(marked, values).split("\x00")
    if "content" not in pieces[::2] and not set(PARTS) <= set(pieces[::2]):
        pieces = ["content", "\n\n" if pieces else "", *pieces]
    return system.rstrip("\n"), ("", *pieces)


def _fill(text: str, values: dict[str, str]) -> str:
    """``text`` with each placeholder replaced by its value (inserted as it is, never read again); a paragraph
    that is only an empty section is left out."""
    paragraphs = []
    for paragraph in text.split("\n\n"):
        alone = _PLACEHOLDER.fullmatch(paragraph.strip())
        if alone is not None and not values[alone.group(1)]:
            continue
        paragraphs.append(_PLACEHOLDER.sub(lambda m: values[m.group(1)], paragraph))
    return "\n\n".join(paragraphs).strip("\n")


@dataclass(frozen=True, kw_only=True)
class Prompt:
    """A built prompt."""

    system: str
    """The static part: intro, instructions, response format, footer."""
    prompt: str
    """The dynamic part: tools, contexts, working memory, updates."""
    turns: tuple[tuple[str, str], ...] = ()
    """The compact prompt's conversation as chat messages (``"user"`` or ``"assistant"``, text), oldest first."""
    speakers: tuple[str, ...] = ()
    """The names of the people in ``turns`` (a line starting with one of them and a colon is an invented turn)."""
    tools: tuple[ToolSpec, ...] = ()
    """The actions (and outputs) the compact prompt offers, for a model that calls tools in its own format."""
    reply: str = ""
    """The output type a plain-text answer goes to (the compact prompt); empty: the first output."""
    kept: str = ""
    """The part of ``system`` that shows what the conversation keeps (the compact prompt: the bot's ``render`` or
    memory), as it appears there; empty when it shows none."""


def xml_attr(value: Any) -> str:
    """A value escaped for a double-quoted XML attribute (``escape_attr`` of its text)."""
    return escape_attr(str(value))


_ATTR_NAME = re.compile(r"[A-Za-z_][\w.\-]*\Z")


def format_value(value: Any) -> str:
    """Text for a value: strings as they are, everything else as JSON."""
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return json.dumps(value, ensure_ascii=False, default=str)


@functools.lru_cache(maxsize=4096)
def _iso(ms: int) -> str:
    """A timestamp as the prompt shows it, in UTC (``Z``: ISO 8601's short form of ``+00:00``, five characters
    less on every entry) (cached: a prompt shows the same entries again at every step)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _params(params: dict[str, str], hidden: Collection[str] = ()) -> str:
    """Attributes from ``params`` but those named in ``hidden``; a name that is not a plain XML name (it came from
    elsewhere and could carry markup) is left out, and so is an empty value (it tells the model nothing)."""
    return "".join(
        f' {k}="{xml_attr(v)}"' for k, v in params.items() if v != "" and k not in hidden and _ATTR_NAME.match(k)
    )


_MESSAGE_ID = "message_id"
"""The input param naming the platform's message: shown only where the bot can do something with it
(``quiet_params``)."""


def quiet_params(actions: Sequence[Action], outputs: Sequence[Output]) -> frozenset[str]:
    """The input params a conversation whose actions and outputs are these does not show the model: the message id
    (``message_id``), unless one of them takes one, its schema naming ``message_id`` (Discord's ``discord:react``,
    Telegram's checklist that ``replace``s one posted before, an author's own "pin" or "edit"). Replies thread under
    the message answered in code (each platform's ``REPLY_TO``), without the model: to it, an id nothing takes is
    noise, some 30 bytes of every input (issue 51)."""
    schemas = [
        *(a.schema for a in actions),
        *(o.schema for o in outputs),
        *(o.attributes for o in outputs if o.attributes is not None),
    ]
    return frozenset() if any(_MESSAGE_ID in schema.json_schema_text for schema in schemas) else _NO_MESSAGE_ID


_NO_MESSAGE_ID = frozenset((_MESSAGE_ID,))


def format_action(action: Action) -> str:
    """``<action name=...>`` with description, instructions, schema, returns and examples (made once for the same
    texts: every step's prompt shows the same actions)."""
    return _action_xml(
        action.name,
        action.description,
        action.instructions,
        action.schema.json_schema_text,
        action.call_format == "xml",
        None if action.returns is None else action.returns.json_schema_text,
        tuple(action.examples),
    )


@functools.lru_cache(maxsize=1024)
def _action_xml(
    name: str,
    description: str,
    instructions: str,
    schema: str,
    xml_call: bool,
    returns: str | None,
    examples: tuple[str, ...],
) -> str:
    parts = [f'<action name="{xml_attr(name)}">']
    if description:
        parts.append(f"<description>{escape_text(description)}</description>")
    if instructions:
        parts.append(f"<instructions>{instructions}</instructions>")
    parts.append(f"<schema>{escape_text(schema)}</schema>")
    if xml_call:
        parts.append(f"<call_format>{XML_CALL_FORMAT}</call_format>")
    if returns is not None:
        parts.append(f"<returns>{escape_text(returns)}</returns>")
    if examples:
        parts.append("<examples>" + "\n".join(examples) + "</examples>")
    parts.append("</action>")
    return "".join(parts)


def format_output(output: Output) -> str:
    """``<output type=...>`` with description, instructions, content and attributes schemas, examples (made once for
    the same texts: every step's prompt shows the same outputs)."""
    return _output_xml(
        output.type,
        output.description,
        output.instructions,
        output.schema.json_schema_text,
        None if output.attributes is None else output.attributes.json_schema_text,
        tuple(output.examples),
    )


@functools.lru_cache(maxsize=1024)
def _output_xml(
    type_: str, description: str, instructions: str, schema: str, attributes: str | None, examples: tuple[str, ...]
) -> str:
    parts = [f'<output type="{xml_attr(type_)}">']
    if description:
        parts.append(f"<description>{escape_text(description)}</description>")
    if instructions:
        parts.append(f"<instructions>{instructions}</instructions>")
    parts.append(f"<content_schema>{escape_text(schema)}</content_schema>")
    if attributes is not None:
        parts.append(f"<attributes_schema>{escape_text(attributes)}</attributes_schema>")
    if examples:
        parts.append("<examples>" + "\n".join(examples) + "</examples>")
    parts.append("</output>")
    return "".join(parts)


def format_log(log: Log, *, media: Mapping[str, Loaded] | None = None, quiet: frozenset[str] = frozenset()) -> str:
    """One working-memory entry as XML; an input's attachments follow its text (``media``: what the
    current run fetched from them). Every text in it that our code did not write is escaped.

    An input shows the params the model can use: not those it marks ``hidden`` (``InputRef.hidden``: what goes
    without saying where it was received), nor those the conversation does not show (``quiet``:
    ``quiet_params``). An output, the bot's own answer, shows no time: the input it answers has one, and nothing
    reads it from the prompt (the catch-up, the summaries and the reminders read the entries' ``timestamp``)."""
    if isinstance(log, InputRef):
        body = escape_text(log.text if log.text is not None else format_value(log.data))
        if log.attachments:  # our markup; what it shows of an attachment is escaped by format_attachments
            body = "\n".join(p for p in (body, format_attachments(log.attachments, media)) if p)
        hidden = quiet.union(log.hidden) if log.hidden else quiet
        ts = _iso(log.timestamp)
        return f'<input type="{xml_attr(log.type)}"{_params(log.params, hidden)} timestamp="{ts}">{body}</input>'
    if isinstance(log, OutputRef):
        body = log.text if log.text is not None else (log.content if log.data is None else format_value(log.data))
        status = f' error="{xml_attr(log.error)}"' if log.error else ""
        return f'<output type="{xml_attr(log.type)}"{_params(log.params)}{status}>{escape_text(body)}</output>'
    ts = _iso(log.timestamp)
    if isinstance(log, ActionCall):
        body = log.content if log.data is None else format_value(log.data)
        return (
            f'<action_call name="{xml_attr(log.name)}" id="{xml_attr(log.id)}" timestamp="{ts}">'
            f"{escape_text(body)}</action_call>"
        )
    if isinstance(log, ActionResult):
        if log.error is not None:
            body = f"<error>{escape_text(log.error)}</error>"
        else:
            body = escape_text(log.text if log.text is not None else format_value(log.data))
            if log.attachments:  # our markup; what it shows of an attachment is escaped by format_attachments
                body = "\n".join(p for p in (body, format_attachments(log.attachments, media)) if p)
        return (
            f'<action_result name="{xml_attr(log.name)}" callId="{xml_attr(log.call_id)}" timestamp="{ts}">'
            f"{body}</action_result>"
        )
    if isinstance(log, Thought):
        return f'<thought timestamp="{ts}">{escape_text(log.content)}</thought>'
    if isinstance(log, EventRef):
        source = f' source="{xml_attr(log.source)}"' if log.source else ""
        body = "" if log.data is None else escape_text(format_value(log.data))
        return f'<event name="{xml_attr(log.name)}"{source} timestamp="{ts}">{body}</event>'
    assert isinstance(log, ErrorLog)
    return f'<error source="{xml_attr(log.source)}" timestamp="{ts}">{escape_text(log.message)}</error>'


def _context_block(state: ContextState) -> str:
    ctx = state.context
    parts = [f'<context type="{xml_attr(ctx.type)}" key="{xml_attr(state.key)}">']
    if ctx.description:
        parts.append(f"<description>{ctx.description}</description>")
    instructions = ctx.instructions(state) if callable(ctx.instructions) else ctx.instructions
    if instructions:
        parts.append(f"<instructions>{instructions}</instructions>")
    if ctx.render is not None:  # the author's markup: it escapes what it shows with ``escape_text``
        try:
            parts.append(str(ctx.render(state)))
        except Exception as exc:  # the author's code: say whose it is
            raise RunError(
                f"the render function of context {ctx.type!r} raised {type(exc).__name__}: {exc}; fix that render"
            ) from exc
    elif state.memory:
        parts.append(f"<memory>{escape_text(format_value(state.memory))}</memory>")
    for section in _sections(state):  # (what plugins show, escaped by them: core.prompt_sections)
        if section.text:
            parts.append(section.text)
    if state.state_log.entries:
        parts.append(f"<state>{escape_text(format_value(state.state_log.folded()))}</state>")
    parts.append("</context>")
    return "\n".join(parts)


def _sections(state: ContextState) -> list[PromptSection]:
    """The sections plugins put in ``state`` (``core.prompt_sections``), in their order."""
    sections = state.sections
    if not sections:
        return []
    return sorted(sections.values(), key=lambda s: s.order)


def window(
    memory: WorkingMemory,
    *,
    count: int,
    token_budget: int,
    media: Mapping[str, Loaded] | None = None,
    quiet: frozenset[str] = frozenset(),
) -> list[str]:
    """The newest processed entries, at most ``count`` of them and about ``token_budget`` tokens (4 characters a
    token), formatted, oldest first. Reads at most ``count`` entries from the end; the text of a settled entry is
    formatted once (``WorkingMemory.keep_text``).

    The first entry shown is at a position of ``memory`` that is a multiple of a quarter of ``count``, when one
    leaves something to show: as the conversation goes on, the window's start moves a quarter of it at once, not
    one entry at every message, so two requests in a row share their working memory's first part (what a
    provider's prompt cache discounts). ``memory`` drops its oldest entries a quarter of its limit at a time
    (``WorkingMemory.trim``), which keeps those positions in step when that quarter is a multiple of this one (the
    defaults, 200 and 40, and the built-in assistant's, 40 and 40)."""
    out: list[str] = []
    used = 0
    budget_chars = token_budget * 4
    shown = memory.prompt_texts()
    logs = memory.logs
    step = max(1, count // 4)
    aligned = 0  # entries shown if the window starts at the last position passed that is a multiple of ``step``
    for seen, i in enumerate(range(len(logs) - 1, -1, -1)):
        if seen >= count * 2 or len(out) >= count:
            break
        log = logs[i]
        if log.processed:
            text = shown.get(log.id)
            if text is None:
                text = format_log(log, media=media, quiet=quiet)
                memory.keep_text(log, text)
            used += len(text)
            if used > budget_chars and out:
                break
            out.append(text)
        if i % step == 0:
            aligned = len(out)
    if aligned:  # (none: an entry alone past the budget, or no aligned position within reach: the newest that fit)
        del out[aligned:]
    out.reverse()
    return out


@functools.lru_cache(maxsize=64)
def _without_actions(template: PromptTemplate) -> PromptTemplate:
    """``template`` for a step that offers no action: the framework's instructions and response format without
    what concerns actions (a bot author's own texts stay as written)."""
    instructions = INSTRUCTIONS_WITHOUT_ACTIONS if template.instructions == INSTRUCTIONS else template.instructions
    response = RESPONSE_FORMAT_WITHOUT_ACTIONS if template.response == RESPONSE_FORMAT else template.response
    footer = "Keep answers useful and concise." if template.footer == FOOTER else template.footer
    if (instructions, response, footer) == (template.instructions, template.response, template.footer):
        return template
    return dataclasses.replace(template, instructions=instructions, response=response, footer=footer)


def build_prompt(
    *,
    state: ContextState,
    actions: Sequence[Action],
    outputs: Sequence[Output],
    updates: Sequence[Log],
    template: PromptTemplate = DEFAULT_TEMPLATE,
    persona: str = "",
    quiet: frozenset[str] | None = None,
) -> Prompt:
    """Build the prompt for one step of a run of ``state``: ``template``'s sections (``persona`` in its place)
    around the content. ``quiet``: the input params the conversation does not show (``quiet_params`` of every
    action and output it has, whoever the run is for: the engine passes them; None: of ``actions`` and ``outputs``).

    The working memory shows the processed entries and then ``updates``, the new ones, in place: they are its last
    entries, and ``<updates count="N"/>`` says how many (the Prompting seed shows them in ``<updates>`` apart,
    after ``</working-memory>``). So the next step's working memory, with these entries processed, begins with
    what this one shows, byte for byte, and the request before is the start of the next one up to the end of its
    working memory: what a provider's prompt cache discounts (issue 51; what is new in a request is the answer
    and the new input, not the input before it moved from ``<updates>`` into ``<working-memory>``)."""
    ctx = state.context
    if not actions:  # (no action offered: no action syntax either, when the template's texts are the framework's)
        template = _without_actions(template)
    if quiet is None:
        quiet = quiet_params(actions, outputs)
    media = loaded_of(state.values)
    memory = window(
        state.working_memory, count=ctx.max_working_memory, token_budget=ctx.max_prompt_tokens, media=media, quiet=quiet
    )
    parts = {
        "actions": "<available-actions>\n" + "\n".join(format_action(a) for a in actions) + "\n</available-actions>"
        if actions
        else "",
        "outputs": "<available-outputs>\n" + "\n".join(format_output(o) for o in outputs) + "\n</available-outputs>",
        "contexts": "<contexts>\n" + "\n".join(_context_block(each) for each in (state, *state.used)) + "\n</contexts>",
        "workingMemory": "<working-memory>\n"
        + "\n".join([*memory, *(format_log(u, media=media, quiet=quiet) for u in updates)])
        + "\n</working-memory>",
        "updates": f'<updates count="{len(updates)}"/>',
    }
    system, prompt = template.render(persona=persona, content=parts)
    return Prompt(system=system, prompt=prompt)


COMPACT_RULES = """\
Reply to the last message directly and helpfully, in one or two short sentences, in the same language as that \
message. (Never explain how to hurt people, steal or commit crimes.)"""
"""The compact prompt's instructions: the model answers in plain text, which becomes the output. (Told to "politely
refuse anything harmful, dangerous or illegal", the 0.5B model refused harmless first messages: "Hello!", "My name
is Ada and I like cats.", "Hello! My favourite colour is green." each got "I'm sorry, but I can't assist with that
request." under a bot's own instructions, 3 of 8 such messages, and still wrote the steps of a bomb; worded as
here, 0 of 8, and bench/quality.py as before: 32/36 and tools 13/14, refusal 2/3.)"""
COMPACT_RULES_AFTER_TOOL = """\
You did what the last message asked with a tool. Reply to its writer as "you", in one or two short sentences, in \
the same language as their message: what was done and what the result says."""
"""The compact prompt's instructions once a tool did what the message asked: its result is the answer's matter. (A
small model told to refuse what is harmful refuses the answer after a tool that succeeded: "I'm sorry, but I can't
assist with that request." after a todo was added; told to "tell the person", it wrote of "the person in the
conversation" in the third person.)"""
COMPACT_TOOLS_MAX = 16
"""Actions the compact prompt offers at most (the first ones). The embedded model lists them one line each to decide
which a message needs, and only the chosen one in full to write its call: an author's ninth action is offered too."""
TOOL_RESULT_CHARS = 1500
"""Characters of a tool's result shown in the compact prompt at most."""


def _compact_text(log: InputRef, *, indent: str = "") -> str:
    """The text of an input, escaped (nobody can write a tag or a chat template's token), its later lines
    indented by ``indent``, and a stand-in line (ours, on one line) for each attachment, never the bytes."""
    text = _line_text(log.text if log.text is not None else format_value(log.data), indent=indent)
    for attachment in log.attachments:
        said = " (transcribed above)" if attachment.text else f" ({attachment.note})" if attachment.note else ""
        text = f"{text}\n[{' '.join(escape_text(describe(attachment) + said).split())}]".strip()
    return text


def _speaker(log: InputRef) -> str:
    """Who wrote the input (escaped, without colons), or ``""``."""
    who = str(log.params.get("user") or log.params.get("author") or "")
    return " ".join(escape_text(who).replace(":", " ").split())


def _line_text(text: str, *, indent: str = "  ") -> str:
    """Message text for one line of the compact prompt: escaped, and its later lines indented, so that nobody can
    start a line of their own (``you: ...``) inside a message."""
    text = escape_text(text)
    return text.replace("\n", "\n" + indent) if indent else text


def _compact_line(log: Log, *, tools: bool = False) -> str | None:
    if isinstance(log, InputRef):
        return f"{_speaker(log) or 'user'}: {_compact_text(log, indent='  ')}"
    if isinstance(log, OutputRef) and not log.error:
        return f"you: {_line_text(log.content if log.data is None else format_value(log.data))}"
    if isinstance(log, ErrorLog):
        return f"(note: {_line_text(log.message)})"
    if tools and isinstance(log, ActionCall):
        return f"(you called {_line_text(log.name)}: {_line_text(log.content.strip())})"
    if tools and isinstance(log, ActionResult):
        return f"({_line_text(log.name)} answered: {_line_text(_tool_result(log))})"
    return None


def _tool_call(log: ActionCall) -> str:
    """A call as the ``tool_call`` turn: ``{"name": ..., "arguments": {...}}``, with no ``<``, ``>`` or ``&``
    that could read as markup or a template token (they are written as JSON escapes)."""
    try:
        arguments = json.loads(log.content) if log.content.strip() else {}
    except ValueError:
        arguments = {}
    if not isinstance(arguments, dict):
        arguments = {}
    text = json.dumps({"name": log.name, "arguments": arguments}, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


_SAVED_NOTE = re.compile(r"\s\(saved to †[^\n]*\)\Z")
"""The note of the state paths a result was saved to (``core.references.saved_note``), at its end."""


def _tool_result(log: ActionResult) -> str:
    """What a call returned (or why it failed), escaped and bounded; without the note of the state paths it was
    saved to (a small model repeats "(saved to †state.notes)" to the person; the context's render shows the state)."""
    if log.error is not None:
        text = f"error: {log.error}"
    else:
        text = _SAVED_NOTE.sub("", log.text) if log.text is not None else format_value(log.data)
    if len(text) > TOOL_RESULT_CHARS:
        text = text[:TOOL_RESULT_CHARS] + " [...]"
    return escape_text(text)


def _compact_turns(logs: Sequence[Log], *, tools: bool = False) -> tuple[tuple[str, str], ...]:
    """The inputs and outputs as chat messages; consecutive messages of one role are joined (chat templates
    want user and assistant to alternate), and the people are named when there are several. With ``tools``,
    the calls and their results too (``tool_call`` and ``tool`` turns)."""
    several = len({_speaker(log) for log in logs if isinstance(log, InputRef)}) > 1
    turns: list[tuple[str, str]] = []
    for log in logs:
        if isinstance(log, InputRef):
            who = _speaker(log)
            role, text = "user", (f"{who}: " if several and who else "") + _compact_text(log)
        elif isinstance(log, OutputRef) and not log.error:
            role, text = "assistant", escape_text(log.content if log.data is None else format_value(log.data))
        elif tools and isinstance(log, ActionCall):
            turns.append(("tool_call", _tool_call(log)))
            continue
        elif tools and isinstance(log, ActionResult):
            if turns and turns[-1][0] == "tool_call":  # a result whose call left the window is left out
                turns.append(("tool", _tool_result(log)))
            continue
        else:
            continue
        if turns and turns[-1][0] == role:
            turns[-1] = (role, f"{turns[-1][1]}\n{text}")
        else:
            turns.append((role, text))
    while turns and turns[0][0] != "user":
        turns.pop(0)
    return tuple(turns)


def compact_tools(actions: Sequence[Action]) -> tuple[ToolSpec, ...]:
    """The tools the compact prompt offers: the first ``COMPACT_TOOLS_MAX`` actions, each with its description
    and instructions (escaped) and its argument schema without titles."""
    tools = []
    for action in actions[:COMPACT_TOOLS_MAX]:
        words = " ".join(p.strip() for p in (action.description, action.instructions) if p and p.strip())
        schema = _untitled(action.schema.json_schema)
        if not isinstance(schema, dict) or schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        tools.append(ToolSpec(name=action.name, description=escape_text(words), parameters=schema))
    return tuple(tools)


def _untitled(schema: Any) -> Any:
    """A JSON Schema without its ``title`` keys (they cost tokens and tell a model nothing)."""
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema


_INTRODUCTION = re.compile(
    r"(?i)\b(?:my name is|i am called|call me|je m'appelle|mon nom est|me llamo|mi nombre es|ich heiße|ich heisse"
    r"|mein name ist)\s+([^\W\d_][\w'-]{0,30})"
)
"""A person saying their name (English, French, Spanish, German)."""


def _facts(state: ContextState, logs: Sequence[Log]) -> list[str]:
    """The facts the run may show (those its sections know, ``PromptSection.known``, or those its memory dict holds:
    a bot without the facts plugin), and the names people gave in ``logs``."""
    memory = state.memory
    stored = memory.get("facts") if isinstance(memory, dict) else None
    known = [line for section in _sections(state) for line in section.known]
    kept = [*known, *(stored if isinstance(stored, list) else [])]
    facts = [escape_text(str(f)) for f in kept if str(f).strip()][-10:]
    for log in logs:
        if isinstance(log, InputRef) and log.text:
            for name in _INTRODUCTION.findall(log.text):
                who = _speaker(log)
                fact = f"{who}'s name is {name}" if who else f"The user's name is {name}"
                if fact not in facts:
                    facts.append(fact)
    return facts


def _rank(log: Log) -> int:
    """A number decided by the entry's id alone, the same at every turn (``_compact_window``)."""
    return int.from_bytes(hashlib.blake2b(log.id.encode(), digest_size=4).digest(), "big")


def _compact_window(logs: Sequence[Log], *, history: int, tools: bool) -> list[Log]:
    """The processed entries the compact prompt shows, oldest first: all of them while they hold ``3 * history``
    messages or fewer, then from the input of lowest ``_rank`` among those that leave at least ``history``
    messages and at most ``3 * history`` in the window (the tool calls and results between them come along
    uncounted).

    A window that slid by one message at every turn would change the start of the prompt each time, and a model
    that keeps the prompt it already processed (llama.cpp's cache) would evaluate it all again. The input of
    lowest rank in a range that moves by one message a turn stays the lowest until it leaves the range or a
    lower one enters (winnowing): with the default ``history``, about one change in four turns, whatever the ids.
    Ranks depend on the entries alone, not on their position, so they stay put as old entries leave."""
    shown: list[Log] = []
    counted, start = 0, None
    for log in reversed(logs):
        if not log.processed or _compact_line(log, tools=tools) is None:
            continue
        message = _compact_line(log) is not None
        if counted >= 3 * history and message:
            break
        shown.append(log)
        counted += message
        if counted >= history and isinstance(log, InputRef) and (start is None or _rank(log) < _rank(shown[start])):
            start = len(shown) - 1
    else:
        start = None
    window = shown if start is None else shown[: start + 1]
    window.reverse()
    return window


def reply_output(state: ContextState, outputs: Sequence[Output]) -> Output | None:
    """The output a plain-text answer goes to: the first one of the conversation's platform (the context a bot's
    own is laid over), else the first one."""
    platform = state.context.laid_over or state.context
    mine = next((o for o in outputs if o.context is not None and platform.includes(o.context)), None)
    return mine if mine is not None else (outputs[0] if outputs else None)


def output_tools(outputs: Sequence[Output]) -> tuple[ToolSpec, ...]:
    """Outputs offered as tools (``ToolSpec.output``): the arguments are the content (``text`` for text, else
    ``content``) and the attributes, each with its schema."""
    tools = []
    for output in outputs:
        content = _untitled(output.schema.json_schema)
        if isinstance(content, dict) and content.get("type") == "string":
            key, content = "text", {**content, "minLength": max(1, int(content.get("minLength") or 0))}
        else:
            key = "content"
        properties: dict[str, Any] = {key: content}
        required = [key]
        if output.attributes is not None:
            attrs = _untitled(output.attributes.json_schema)
            if isinstance(attrs, dict) and isinstance(attrs.get("properties"), dict):
                properties.update(attrs["properties"])
                required += [k for k in attrs.get("required") or () if k in attrs["properties"]]
        words = " ".join(p.strip() for p in (output.description, output.instructions) if p and p.strip())
        tools.append(
            ToolSpec(
                name=output.type,
                description=escape_text(words),
                parameters={"type": "object", "properties": properties, "required": required},
                output=key,
            )
        )
    return tuple(tools)


def _own_context_text(state: ContextState) -> tuple[str, str]:
    """What the bot's own context says about this conversation: its instructions and its ``render`` (or its memory
    when it has no render), for the compact prompt; and the part of it that shows what the conversation keeps
    (``Prompt.kept``). A platform's context alone says nothing here (its instructions are about the response
    format)."""
    ctx = state.context
    own = ctx.laid if ctx.laid is not None else (None if ctx.conversation else ctx)
    used = [_used_text(each) for each in state.used]
    if own is None:
        return "\n\n".join(u for u in used if u), ""
    parts = []
    instructions = own.instructions(state) if callable(own.instructions) else own.instructions
    if instructions and instructions.strip():
        parts.append(instructions.strip())
    kept = ""
    if ctx.render is not None:  # the author's markup: it escapes what it shows with ``escape_text``
        try:
            shown = str(ctx.render(state)).strip()
        except Exception as exc:  # the author's code: say whose it is
            raise RunError(
                f"the render function of context {own.type!r} raised {type(exc).__name__}: {exc}; fix that render"
            ) from exc
        if shown:
            kept = f"What this conversation keeps:\n{shown}"
    elif isinstance(state.memory, dict):
        memory = {k: v for k, v in state.memory.items() if k != "facts" and v not in (None, "", [], {})}
        if memory:
            kept = f"What this conversation keeps: {escape_text(format_value(memory))}"
    return "\n\n".join([*parts, *([kept] if kept else []), *(u for u in used if u)]), kept


def _used_text(state: ContextState) -> str:
    """What another context the run uses (``Context.uses``) shows the compact prompt: its ``render``."""
    ctx = state.context
    if ctx.render is None:
        return ""
    try:
        shown = str(ctx.render(state)).strip()
    except Exception as exc:  # the author's code: say whose it is
        raise RunError(
            f"the render function of context {ctx.type!r} raised {type(exc).__name__}: {exc}; fix that render"
        ) from exc
    return f"What the {ctx.type} context keeps:\n{shown}" if shown else ""


def build_compact_prompt(
    *,
    state: ContextState,
    outputs: Sequence[Output],
    updates: Sequence[Log],
    persona: str = "",
    instructions: str = "",
    history: int = 6,
    actions: Sequence[Action] = (),
    tools: bool = False,
) -> Prompt:
    """A short prompt for small local models: the persona, the bot's ``instructions`` (``Bot.instructions``), the
    facts remembered about the conversation, who speaks, the last few messages; the model answers in plain text
    (``ModelRequest.plain``). ``turns`` holds the messages for chat templates, ``prompt`` the same as a transcript.

    With ``actions`` (for a model that calls tools in its own chat format), they are offered as ``tools``, and
    the calls and results in the window are turns too; without, there are no tools: a model of a few hundred
    million parameters cannot use the response format's. With ``tools`` (the model calls tools in its own format),
    the outputs other than the reply are offered as tools too (``output_tools``), so are the actions, and the bot's
    own context (its instructions, its ``render`` or memory) is shown: the author's definitions reach the model in
    the one form it handles, and the grammar is built from them. ``reply`` names the output plain text goes to."""
    reply = reply_output(state, outputs)
    offered = compact_tools(actions)
    if tools or offered:
        others = [o for o in outputs if o is not reply]
        offered = (*offered, *output_tools(others))
    window = _compact_window(state.working_memory.logs, history=history, tools=bool(offered))
    logs = [*window, *updates]
    speakers = tuple(dict.fromkeys(s for s in (_speaker(log) for log in logs if isinstance(log, InputRef)) if s))
    turns = _compact_turns(logs, tools=bool(offered))
    answered = bool(turns) and turns[-1][0] == "tool" and not turns[-1][1].startswith("error:")
    parts = [persona, COMPACT_RULES_AFTER_TOOL if answered else COMPACT_RULES, instructions.strip()]
    own, kept = _own_context_text(state)
    if own:
        parts.append(own)
    facts = _facts(state, [*state.working_memory.logs, *updates])
    if facts:
        parts.append("What you know about this conversation:\n" + "\n".join(f"- {fact}" for fact in facts))
    parts.extend(section.compact for section in _sections(state) if section.compact)
    last = next((log for log in reversed(logs) if isinstance(log, InputRef)), None)
    if last is not None and _speaker(last):
        parts.append(f"You are talking with {_speaker(last)}.")
    lines = [line for line in (_compact_line(log, tools=bool(offered)) for log in logs) if line is not None]
    return Prompt(
        system="\n\n".join(p for p in parts if p),
        prompt="\n".join(lines) or "(no messages)",
        turns=turns,
        speakers=speakers,
        tools=offered,
        reply=reply.type if reply is not None else "",
        kept=kept,
    )
