"""How the embedded model picks a tool for a message: worked examples with the assistant's tools (``ROUTE_EXAMPLES``)
and with other bots' (``ROUTE_DEMOS``, for an author's tools), the question each decision is asked
(``route_question``, the tools in the bot's order), the words a message shares with a tool (``overlap``), a tool a
request says by its name (``named``), a call whose arguments come from nowhere told apart (``grounded``), an
identifier kept to the numbers shown (``narrowed``), and the second question about an output the decision named
(``confirm_question``, after ``CONFIRM_DEMOS``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from .answer_guards import LIST_MARK
from .base import ModelRequest, ToolSpec
from .grammar import ToolCall

__all__ = (
    "CONFIRM_DEMOS",
    "CONFIRM_TASK",
    "ROUTE_DEMOS",
    "ROUTE_EXAMPLES",
    "ROUTE_TASK",
    "closest_action",
    "confirm_question",
    "described",
    "grounded",
    "named",
    "narrowed",
    "offered_again",
    "overlap",
    "remark",
    "repeated",
    "route_question",
    "signature",
    "stated",
    "unborrowed",
)


ROUTE_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Hi there, good evening!", "none"),
    ("What's today's date?", "current_time"),
    ("Remember that I like jazz.", "remember"),
    ("Which facts have you kept about me?", "recall"),
    ("Forget that I like jazz.", "forget"),
    ("Which river is the longest?", "none"),
    ("What did we say about the trip last week?", "search_history"),
    ("How tall is Mount Everest?", "none"),
    ("I love my dog.", "none"),
    ("What is 12 plus 5?", "calculate"),
    ("Remind me tomorrow at 9 to call the bank.", "set_reminder"),
    ("How much is 48 times 12?", "calculate"),
    ("Spell the word apple.", "none"),
    ("Quelle heure est-il ?", "current_time"),
    ("Tell me a joke.", "none"),
    ("Note that my birthday is on May 3.", "remember"),
    ("What do you know about me?", "recall"),
    ("How are you doing today?", "none"),
    ("Find the message where I mentioned my passport.", "search_history"),
    ("Which reminders have I set?", "list_reminders"),
    ("Where do penguins live?", "none"),
    ("Merci beaucoup !", "none"),
    ("Do you remember what I told you?", "recall"),
    ("Please delete what you know about my birthday.", "forget"),
    ("How is your day going?", "none"),
    ("In 20 minutes, remind me to check the oven.", "set_reminder"),
    ("Cancel my reminder about the bank.", "cancel_reminder"),
    ("Write two lines about the sea.", "none"),
    ("Comment allez-vous ce matin ?", "none"),
    ("¿Qué tal estás hoy?", "none"),
)
"""Messages and the tool they need, shown to the model before it decides (the bot's own tools; a tool without
examples, an MCP server's, is chosen by its description). A small model told only the tools' descriptions calls
one for almost every message; with these it tells most messages that need none. About half need none: with the
reminders' and ``forget``'s examples added alone, "Which planet do we live on?" was decided as ``recall`` and "Say
the word banana." as ``calculate``."""


ROUTE_TASK = (
    "Each message comes with the tools the assistant has. Answer with the name of the tool the message asks for, "
    "or none when it needs no tool: greetings, thanks, opinions, questions answered from what you know."
)
_MUSIC = (
    ("play_music(song)", "Plays a song or an artist."),
    ("send_email(to, text)", "Sends an email to someone."),
    ("send_sms(phone, text)", "Sends a text message to a phone."),
    ("order_pizza(size, toppings)", "Orders a pizza for delivery."),
    ("flight_status(flight_number)", "Whether a flight is on time."),
)
_TRAVEL = (
    ("book_taxi(address)", "Books a taxi to an address."),
    ("translate(text, language)", "Translates words into another language."),
    ("stock_price(company)", "The current price of a company's stock."),
    ("add_contact(name, phone)", "Saves a person's phone number."),
    ("delete_contact(name)", "Deletes a saved contact."),
    ("search_files(words)", "Searches the person's files for words."),
)
ROUTE_DEMOS: tuple[tuple[tuple[tuple[str, str], ...], str, str, str], ...] = (
    (_MUSIC, "", "Play something by Queen.", "play_music"),
    (_MUSIC, "", "Thanks, that was great!", "none"),
    (_MUSIC, "", "Email Sam that I'll be late.", "send_email"),
    (_MUSIC, "", "What is the tallest mountain in the world?", "none"),
    (_MUSIC, "I'm flying with BA 117 tonight.", "Is it on time?", "flight_status"),
    (_MUSIC, "", "Text my brother that I landed.", "send_sms"),
    (_MUSIC, "", "Is BA 117 going to leave on time?", "flight_status"),
    (_MUSIC, "", "What is a flight attendant?", "none"),
    (_MUSIC, "My brother's phone is 0612 3456.", "He is a nurse.", "none"),
    (_MUSIC, "", "I could eat a large margherita right now, get me one.", "order_pizza"),
    (_MUSIC, "", "Hello, how are you?", "none"),
    (_TRAVEL, "", "How do you say cat in Spanish?", "translate"),
    (_TRAVEL, "", "I like sunny days.", "none"),
    (_TRAVEL, "", "Get me a cab to the airport.", "book_taxi"),
    (_TRAVEL, "My hotel is at 12 Park Lane.", "Book me a taxi there.", "book_taxi"),
    (_TRAVEL, "", "How much is one Apple share worth now?", "stock_price"),
    (_TRAVEL, "", "How many contacts can a phone hold?", "none"),
    (_TRAVEL, "", "Remove Bob from my contacts.", "delete_contact"),
    (_TRAVEL, "I'm learning Spanish.", "It's hard but fun.", "none"),
    (_TRAVEL, "", "Tell me a joke.", "none"),
    (_TRAVEL, "", "Look through my files for the tax form.", "search_files"),
    (_TRAVEL, "", "Anna's number is 555 0192, keep it.", "add_contact"),
)
"""Worked examples for tools that have none here (a bot author's): other bots' tools, each message with its list
(and the person's line before it, when it says what the message is about: "Book me a taxi there.").
Half the messages need a tool, half none, so the model learns neither that every message needs one nor that none
does; the tools of one list are close to each other, so it learns to tell them apart."""


def signature(tool: ToolSpec) -> str:
    """``name(argument, ...)``: a tool's arguments tell a small model what it is about as much as its words."""
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    return f"{tool.name}({', '.join(list(properties)[:6] if isinstance(properties, dict) else [])})"


def described(tool: ToolSpec) -> str:
    """``name(argument, ...) description``: what the words of a person's lines are weighed against (``overlap``)."""
    return f"{signature(tool)} {tool.description}"


def _stems(text: str) -> set[str]:
    return {word[:4] for word in re.findall(r"[^\W\d_]{3,}", text.lower()) if word not in _COMMON}


_COMMON = frozenset(
    [
        "the",
        "and",
        "for",
        "you",
        "your",
        "with",
        "that",
        "this",
        "what",
        "from",
        "into",
        "are",
        "was",
        "how",
        "much",
        "many",
        "any",
        "use",
        "when",
    ]
)


def overlap(message: str, tool: str) -> int:
    """Words (their first four letters) ``message`` shares with a tool's name and description: a decision for a
    tool that shares none is weighed again (``LocalModel._decide``), and a message decided as needing none is asked
    about the tool that shares the most (``closest_action``)."""
    return len(_stems(message) & _stems(tool))


def closest_action(message: str, tools: Sequence[ToolSpec], *, earlier: str = "") -> ToolSpec | None:
    """The action (not an output) ``message`` shares the most words with (``overlap``; a tie broken by the words
    the person's line before it, ``earlier``, shares: "How much is that in pounds?" fits a unit converter and a
    currency converter alike, "I have 200 euros left." only the second; then the first of them), or None when it
    shares none with any: the one a message decided as needing no tool is asked about once more."""
    scored = [
        (overlap(message, described(t)), overlap(earlier, described(t)), -n, t)
        for n, t in enumerate(tools)
        if not t.output
    ]
    best = max(scored, key=lambda s: s[:3], default=None)
    return best[3] if best is not None and best[0] > 0 else None


_SUBJECTS = frozenset(
    [
        "i",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "im",
        "my",
        "we",
        "we're",
        "we've",
        "our",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "it's",
        "its",
        "there",
        "he",
        "she",
        "they",
        "his",
        "her",
        "their",
        "je",
        "j'ai",
        "mon",
        "ma",
        "mes",
        "nous",
        "notre",
        "il",
        "elle",
        "yo",
        "mi",
        "mis",
        "nosotros",
        "ich",
        "mein",
        "meine",
        "wir",
        "unser",
        "unsere",
        "es",
    ]
)
"""First words of a sentence that begins with its subject (English, French, Spanish, German), not with a verb."""
_ASKING = re.compile(
    r"\b(?:please|pls|want|need|would like|'d like|wish|remind|let me know|tell me|s'il|voudrais|veux|"
    r"besoin|por favor|quiero|necesito|bitte|möchte|brauche)\b",
    re.IGNORECASE,
)
"""Words with which a sentence in a remark's form asks for something ("I want a timer for 5 minutes.")."""
_CLAUSES = re.compile(r"[,;:\n\u2013\u2014]| - |[.!]\s+\S")


def remark(message: str) -> bool:
    """True when ``message`` has the form of a remark: one sentence that is not a question, begins with its subject
    (a pronoun or a determiner: ``_SUBJECTS``; a request begins with its verb) and has no word that asks
    (``_ASKING``): "The tea needs 4 minutes.", "I have 200 euros left.". "I already called the plumber, take it
    off my list." is two clauses and "I need milk." asks. A request can take the form of a remark ("I paid 30 for
    dinner." to a bot that splits bills), so the form alone decides nothing: a tool decided for it is asked about
    once more (``LocalModel.stream``)."""
    text = " ".join(message.split()).replace("\u2019", "'")
    if not text or "?" in text or _CLAUSES.search(text.rstrip(".!")):
        return False
    first = text.split()[0].lower().strip("\"'\u201c\u201d\u00ab\u00bb")
    return first in _SUBJECTS and not _ASKING.search(text)


def _defaults(tool: ToolSpec) -> dict[str, Any]:
    """The arguments of ``tool`` its schema gives a default, with it."""
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    return {k: v.get("default") for k, v in (properties or {}).items() if isinstance(v, dict) and "default" in v}


def grounded(call: ToolCall, tool: ToolSpec, request: ModelRequest) -> bool:
    """False when the arguments ``call`` gives (other than the schema's defaults) hold numbers and words but none
    of them is in the conversation (the system prompt with the state it shows, the person's lines): a call for a
    message that needs no tool fills them from nowhere ("How are you today?" -> a forecast for New York)."""
    defaults = _defaults(tool)
    given = [v for k, v in call.arguments.items() if k not in defaults or v != defaults[k]]
    facts = set().union(*(_clues(json.dumps(v, ensure_ascii=False)) for v in given)) if given else set()
    if not facts:
        return True
    said = " ".join([request.system, *(text for role, text in request.turns if role == "user")])
    return bool(facts & _clues(said))


def stated(call: ToolCall, tool: ToolSpec, said: str) -> bool:
    """True when each argument ``call`` gives (other than the schema's defaults) shares a number or a word with
    ``said`` (the person's last lines): the test of a call the decision did not choose (``closest_action``), whose
    message may only share a word with the tool ("We will be five people." -> a booking for today at 19:30)."""
    defaults = _defaults(tool)
    clues = _clues(said)
    return all(
        _clues(json.dumps(v, ensure_ascii=False)) & clues
        for k, v in call.arguments.items()
        if k not in defaults or v != defaults[k]
    )


def without_unstated(call: ToolCall, tool: ToolSpec, said: str) -> ToolCall:
    """``call`` without the arguments the schema gives a default that share no number or word with ``said`` (the
    person's last message, with the dates of the days it names): the call a copied or made-up argument would
    cost ("What day of the week is it today?" after a question about Tokyo: ``current_time`` with ``Asia/Tokyo``
    again, a repeat, where the chat's own time zone was meant). Arguments without a default stay: the call needs
    them. (For a message that asks for what the tool does: one that does not, "How are you today?" with a search
    copied, asks for no call at all.)"""
    defaults = _defaults(tool)
    clues = _clues(said)
    arguments = {
        k: v
        for k, v in call.arguments.items()
        if k not in defaults or _clues(json.dumps(v, ensure_ascii=False)) & clues
    }
    return call if arguments == call.arguments else replace(call, arguments=arguments)


def named(message: str, tools: Sequence[ToolSpec]) -> ToolSpec | None:
    """The action of ``tools`` whose name ``message`` says as a word, when it is a request (no question: "Do you
    remember Titanic?" asks for no fact to be kept; no remark), or None: the built-in assistant's tools are decided
    after worked examples of their own, and "I am a vegetarian, please remember that." was decided as none."""
    if "?" in message or remark(message):
        return None
    words = set(re.findall(r"[^\W\d]+", message.casefold()))
    return next((t for t in tools if not t.output and t.name in words), None)


_CLAUSE = re.compile(r"\s*[,;]\s+|\s+(?=(?:so|because)\s)")


def unborrowed(call: ToolCall, tool: ToolSpec, said: str) -> ToolCall:
    """``call`` without the clauses of its text arguments that hold words of the tool's description the person's
    lines (``said``) do not: the embedded model kept "You are a vegetarian, so I will keep this fact for later
    conversations." for "I am a vegetarian, please remember that.", ``remember`` being described as keeping a fact
    "for later conversations", and kept is "You are a vegetarian.". A text made of such words alone stays whole
    (nothing of the person's would be left)."""
    borrowed = _stems(tool.description) - _stems(said)
    if not borrowed:
        return call
    arguments = dict(call.arguments)
    for key, value in call.arguments.items():
        if not isinstance(value, str):
            continue
        clauses = [c for c in _CLAUSE.split(value.strip()) if c]
        kept = [c for c in clauses if not _stems(c) & borrowed]
        if kept and len(kept) < len(clauses):
            text = ", ".join(c.rstrip(".!?") for c in kept)
            end = value.rstrip()[-1:]
            arguments[key] = text + end if end in ".!?" else text
    return call if arguments == call.arguments else replace(call, arguments=arguments)


def narrowed(tool: ToolSpec, request: ModelRequest) -> ToolSpec:
    """``tool`` with each of its integer identifiers (an argument named ``id`` or ``..._id``, without an enum of
    its own) limited to the whole numbers the conversation shows (the system prompt with the state, the person's
    lines; not those of a date, a time or a decimal): an identifier names something that exists, and what exists
    is shown. Left free, the model wrote the digits of a date it had read ("Cancel that booking." after "I can't
    make it on the 14th." -> ``booking_id`` 20260614). Unchanged when it has none or the conversation shows no
    such number. Its switches the person did not name are left out too (``_unnamed_flags``). For the grammar of
    the call only: the tool is listed to the model as its author wrote it."""
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return tool
    unnamed = _unnamed_flags(properties, request)
    if unnamed:
        properties = {k: v for k, v in properties.items() if k not in unnamed}
        schema = {**schema, "properties": properties}
        tool = replace(tool, parameters=schema)
    ids = [
        k
        for k, v in properties.items()
        if isinstance(v, dict) and v.get("type") == "integer" and "enum" not in v and re.search(r"(?:^|_)id$", k)
    ]
    if not ids:
        return tool
    said = " ".join([request.system, *(text for role, text in request.turns if role == "user")])
    shown = sorted({int(n) for n in re.findall(r"(?<![\d.:/-])\d{1,9}(?![\w]|[.,:/-]\d)", said)})
    changed = {}
    for key in ids:
        low, high = properties[key].get("minimum"), properties[key].get("maximum")
        values = [n for n in shown if (low is None or n >= low) and (high is None or n <= high)]
        if values:
            changed[key] = {**properties[key], "enum": values}
    if not changed:
        return tool
    return replace(tool, parameters={**schema, "properties": {**properties, **changed}})


def _unnamed_flags(properties: dict[str, object], request: ModelRequest) -> set[str]:
    """The switches of a tool (booleans with a default) whose name the person's last message does not say: left to
    their default, never written by the model. Free, it turned them on unasked: "Remember that my sister is called
    Ana." was kept with ``for_everyone`` true, so in a group the fact was recalled for everyone (a person's fact is
    theirs alone unless they say it is for everyone here). Named ("... for everyone in this chat"), the model
    writes it as it would."""
    said = _clues(_last_message(request))
    return {
        key
        for key, value in properties.items()
        if isinstance(value, dict)
        and value.get("type") == "boolean"
        and "default" in value
        and not _clues(re.sub(r"(?<=[a-z])(?=[A-Z])|_", " ", key)) & said
    }


def _last_message(request: ModelRequest) -> str:
    """The person's last message."""
    return next((text for role, text in reversed(request.turns) if role == "user"), "")


def offered_again(tool: ToolSpec, call: ToolCall, error: str, request: ModelRequest) -> ToolSpec:
    """``tool`` with each string argument of the failed ``call`` that ``error`` refuses limited to the values on
    offer, for the call written once more: written again with the error in view, a small model gives the same
    value again ("take it off my list" for the todo to remove, twice; "YEN" for the currency, then "yen").

    On offer: the values the error lists ("unknown currency: use one of EUR, USD, GBP, JPY, CHF": the arguments
    not among them, ``YEN``, are refused); else, for a value the error quotes ("no todo like 'take it off my
    list'"), the items of the lists the conversation shows whose heading shares a word with the message or the
    tool (its state, in the system prompt: ``Todo list:`` then ``1. call the plumber``; not the facts listed after
    it) that share a word with the person's message ("I already called the plumber, ..."), else the one at the
    place the message names ("Remove the last item of my todo list.": ``_place``) when one list is so named.
    Neither: unchanged, as a call would otherwise act on an item the person did not name. For the grammar of the
    call only, as ``narrowed``."""
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return tool
    given = {
        k: v
        for k, v in call.arguments.items()
        if isinstance(v, str)
        and isinstance(properties.get(k), dict)
        and properties[k].get("type") == "string"
        and not {"enum", "const", "format"} & set(properties[k])
    }
    listed = re.search(r"one of:?\s+([^.;\n]+)", error)
    if listed is not None:
        values = [v.strip(" '\"") for v in re.split(r",\s*|\s+or\s+", listed.group(1))]
        offer = list(dict.fromkeys(v for v in values if 0 < len(v) <= _OFFERED_CHARS))[:_OFFERED]
        low = {v.lower() for v in offer}
        refused = [k for k, v in given.items() if v.strip().lower() not in low]
    else:
        message = _last_message(request)
        about = f"{tool.name} {tool.description}"
        named = [shown for head, shown in _lists(request.system) if overlap(message, head) or overlap(about, head)]
        offer = list(dict.fromkeys(item for shown in named for item in shown if overlap(message, item)))[:_OFFERED]
        place = _place(message, len(named[0])) if len(named) == 1 else None
        if not offer and place is not None:  # "the last item", "the second one" of the list the message names
            offer = [named[0][place]]
        refused = [k for k, v in given.items() if any(f"{q}{v}{q}" in error for q in "'\"")]
    if not offer or not refused:
        return tool
    changed = {k: {**properties[k], "enum": offer} for k in refused}
    return replace(tool, parameters={**schema, "properties": {**properties, **changed}})


_ITEM = re.compile(rf"[ \t]*{LIST_MARK}[ \t]+(.+?)[ \t]*")


def _lists(text: str) -> list[tuple[str, list[str]]]:
    """The lists ``text`` shows (lines numbered ``1.`` or bulleted, one after the other), each with the line
    before it (its heading: "Todo list:"); items longer than ``_OFFERED_CHARS`` left out."""
    lists: list[tuple[str, list[str]]] = []
    before = ""
    current_list: list[str] | None = None  # (the list being read: the line before was one of its items)
    for line in text.splitlines():
        item = _ITEM.fullmatch(line)
        if item is None:
            before, current_list = line, None
            continue
        if current_list is None:
            current_list = []
            lists.append((before, current_list))
        if len(item.group(1)) <= _OFFERED_CHARS:
            current_list.append(item.group(1))
    return lists


_PLACES = (
    ("first", "premier", "première", "primero", "primera", "erste", "ersten"),
    ("second", "deuxième", "seconde", "segundo", "segunda", "zweite", "zweiten"),
    ("third", "troisième", "tercero", "tercera", "dritte", "dritten"),
)
_LAST = ("last", "dernier", "dernière", "último", "última", "letzte", "letzten")


def _place(message: str, count: int) -> int | None:
    """The index of the item of a list of ``count`` the message names by its place (the first, second, third or
    last, in English, French, Spanish or German), if it names exactly one."""
    words = set(re.findall(r"\w+", message.lower()))
    places = [n for n, names in enumerate(_PLACES) if words & set(names) and n < count]
    if words & set(_LAST) and count:
        places.append(count - 1)
    return places[0] if len(set(places)) == 1 else None


_OFFERED = 32
"""Values on offer for a refused argument at most (``offered_again``)."""
_OFFERED_CHARS = 120
"""Characters of one such value at most."""


def repeated(call: ToolCall, request: ModelRequest) -> bool:
    """True when ``call`` makes again a call of the conversation's window, with the same arguments (as people
    write them: case, spaces and end punctuation aside), and they share no word or number with the person's last
    message nor a word of the tool's name: the model copying an earlier call for a message that asks for none
    ("What's on my list?" -> ``add_todo("buy milk")`` once more; "Hi, how are you?" -> the note kept before, kept
    again). A message that names the arguments or the tool again ("add milk again", "Set a timer for it." after a
    ``set_timer`` made too early) is a request."""
    if not call.arguments or not request.turns or request.turns[-1][0] != "user":
        return False
    mine = _same_form(call.arguments)
    for role, text in request.turns[:-1]:
        if role != "tool_call":
            continue
        try:
            earlier = json.loads(text)
        except ValueError:
            continue
        if (
            isinstance(earlier, dict)
            and earlier.get("name") == call.name
            and _same_form(earlier.get("arguments")) == mine
        ):
            facts = _clues(json.dumps(call.arguments, ensure_ascii=False)) | _clues(call.name.replace("_", " "))
            return not facts & _clues(request.turns[-1][1])
    return False


def _same_form(arguments: object) -> str:
    """``arguments`` with their texts as people would read them the same: lower case, spaces made one, the end's
    punctuation left out."""
    if isinstance(arguments, dict):
        return json.dumps({k: _same_form(v) for k, v in sorted(arguments.items())}, ensure_ascii=False)
    if isinstance(arguments, str):
        return " ".join(arguments.lower().split()).rstrip(".!?;, ")
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


_NUMBER_WORDS = {
    word: str(number)
    for words in (
        "two three four five six seven eight nine ten eleven twelve",  # (not one: it is as often a pronoun)
        "deux trois quatre cinq six sept huit neuf dix onze douze",
        "dos tres cuatro cinco seis siete ocho nueve diez once doce",
        "zwei drei vier fünf sechs sieben acht neun zehn elf zwölf",
    )
    for number, word in enumerate(words.split(), start=2)
}
"""Numbers people say in words ("a table for two"), as the number a call gives ("guests": 2)."""


def _clues(text: str) -> set[str]:
    """The numbers (as numbers, every digit kept: ``10`` is ``10.0``, 20260614 is not 20260615; those said in words,
    two to twelve, too) and words (their first four letters) of ``text``."""
    words = re.findall(r"[^\W\d_]{3,}", text.lower())
    clues = {word[:4] for word in words if word not in _COMMON}
    clues.update(_NUMBER_WORDS[word] for word in words if word in _NUMBER_WORDS)
    for number in re.findall(r"\d+(?:\.\d+)?", text):
        clues.add(format(Decimal(number).normalize(), "f"))
    return clues


def route_question(tools: Sequence[tuple[str, str]], message: str, *, earlier: str = "") -> str:
    listed = "\n".join(f"- {name}: {description}" for name, description in tools)
    before = f"Earlier: {earlier}\n" if earlier else ""
    return f"Tools:\n{listed}\n- none: no tool.\n{before}Message: {message}"


CONFIRM_TASK = (
    "Say whether the message asks for what the tool does: yes or no. Greetings, thanks, opinions and questions "
    "answered from what you know need no tool: no."
)


def confirm_question(tool: tuple[str, str], message: str, *, earlier: str = "") -> str:
    """The second question about an output the decision named: does the message ask for it (``yes`` or ``no``)."""
    before = f"Earlier: {earlier}\n" if earlier else ""
    return f"Tool: {tool[0]}: {tool[1]}\n{before}Message: {message}\nDoes the message ask for this tool?"


def _confirm_demos() -> tuple[tuple[tuple[str, str], str, str, str], ...]:
    demos = []
    for tools, earlier, text, name in ROUTE_DEMOS:
        if name == "none":  # the tool of its list the message shares most words with: a near miss
            tool = max(tools, key=lambda t: overlap(text, f"{t[0]} {t[1]}"))
        else:
            tool = next(t for t in tools if t[0].startswith(f"{name}("))
        demos.append((tool, earlier, text, "no" if name == "none" else "yes"))
    return tuple(demos)


CONFIRM_DEMOS = _confirm_demos()
"""``ROUTE_DEMOS`` asked the second way: each message with one tool (the one it needs, or, for a message that needs
none, the tool of its list it shares most words with) and whether it asks for it."""
