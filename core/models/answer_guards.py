"""What the embedded model's plain answers must never say, mended before they reach anyone.

A model of half a billion parameters says what its training taught it whatever its prompt says: asked who it is,
it is sometimes "ChatGPT, made by OpenAI" though the operator's persona names it otherwise; told a tool's result,
it sometimes answers "I'm sorry, but I can't assist with that request." after the tool did what was asked, or
answers as if it had not read the result ("there are no events on Tuesday" when the calendar said a dentist at
15:30); told a tool failed, it narrates the conversation ("The conversation keeps a list of tasks and attempts to
remove one item from it."). These are checked on the answer's text, sentence by sentence (``IdentityGuard``), or
as a whole (``is_refusal``, ``shows_result``, ``narrates``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = (
    "LIST_MARK",
    "IdentityGuard",
    "about_itself",
    "claimed",
    "copies_kept",
    "failure_answer",
    "failure_reason",
    "fallback_answer",
    "in_results_words",
    "is_refusal",
    "labelled",
    "narrates",
    "result_note",
    "sentences",
    "shows_result",
    "spoken",
    "unclaimed",
    "unlabelled",
    "unnoted",
)

_MAKERS = re.compile(
    r"\b(open ?ai|chat ?gpt|gpt-?\d\w*|alibaba|qwen|tongyi|anthropic|claude|google|gemini|meta ai|llama|microsoft"
    r"|mistral|hugging ?face|deepmind|bard)\b",
    re.IGNORECASE,
)
"""Companies and model names a small model claims to be or to be made by."""
_FIRST_PERSON = re.compile(r"\b(i|i'm|i am|me|my|je|j'ai|suis|moi|yo|soy|mi|ich|bin|mich)\b|\bI'", re.IGNORECASE)
_ABOUT_YOU = re.compile(
    r"\b(you|your|yourself|vous|tu|toi|ton|ta|votre|usted|tú|eres|du|dich|dein|ihr)\b|" + _MAKERS.pattern,
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。])(\s+)")
_REFUSAL = re.compile(
    r"^\W*(i'?m sorry|i am sorry|sorry|i can'?t|i cannot|i'?m unable|i am unable|unfortunately|as an ai)",
    re.IGNORECASE,
)


def about_itself(message: str) -> bool:
    """True when ``message`` speaks to or about the bot (``you``, a model's or company's name): its answer may
    say who the bot is, and is checked sentence by sentence."""
    return bool(_ABOUT_YOU.search(message))


def is_refusal(answer: str) -> bool:
    """True when ``answer`` starts as a refusal."""
    return bool(_REFUSAL.match(answer))


_FACT = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]{4,}")
"""What an answer can show of a result: a number (``11.02``, ``37,500``, ``15:30``), a word of four letters or more."""


_NUMBER_WORDS = {
    word: str(value)
    for words in (  # (un, une, a: articles as often; once, elf, null: English words too)
        "zero one two three four five six seven eight nine ten eleven twelve",
        "zéro _ deux trois quatre cinq six sept huit neuf dix onze douze",
        "cero uno dos tres cuatro cinco seis siete ocho nueve diez _ doce",
        "_ eins zwei drei vier fünf sechs sieben acht neun zehn _ zwölf",
    )
    for value, word in enumerate(words.split())
    if word != "_"
}
"""Small numbers as words: "the list now holds one item" shows a result of 1."""
_NUMBER_WORD = re.compile(r"\b(" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


_NONE = re.compile(
    r"\b(?:no(?=\s+[^\W\d_])|none|nothing|aucune?|rien|ning[uú]n[oa]?|nada|kein(?:e[nrs]?)?|nichts)\b", re.IGNORECASE
)
"""What shows a count of nothing: "I found no notes about the garden project." shows ``notes_found: 0`` ("no"
before a word only: "No, ..." answers a question)."""


def _values(data: Any) -> Iterator[str]:
    """The values of a result read as JSON (its keys are names, not facts), else the text itself."""
    if isinstance(data, dict):
        for value in data.values():
            yield from _values(value)
    elif isinstance(data, list):
        for value in data:
            yield from _values(value)
    elif data is not None and not isinstance(data, bool):
        yield str(data)


def _number(text: str) -> float | None:
    """``text`` as a number (``37,500`` and ``6,2`` read as people write them), or None (``15:30`` is no number)."""
    if ":" in text:
        return None
    text = text.replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+", text) else text.replace(",", ".")
    try:
        return float(text)
    except ValueError:
        return None


def _facts(text: str) -> set[str]:
    words = {_NUMBER_WORDS[word.lower()] for word in _NUMBER_WORD.findall(text)}
    if _NONE.search(text):
        words.add("0")
    return {fact.lower() for fact in _FACT.findall(text)} | words


def _same(shown: str, fact: str) -> bool:
    if shown == fact or (":" in shown and fact.startswith(shown + ":")):  # 15:03 shows 15:03:00
        return True
    a, b = _number(shown), _number(fact)
    return a is not None and b is not None and abs(a - b) <= 0.015 * max(abs(a), abs(b))  # 6.2 shows 6.21


def shows_result(answer: str, result: str, message: str) -> bool:
    """False when ``answer`` shows none of what a tool's ``result`` adds to the ``message`` it answers: none of the
    result's numbers or words (of four letters or more) that the message does not hold, a number as rounded as
    people round it. A result that adds nothing to the message is shown by any answer."""
    try:
        values = list(_values(json.loads(result)))
    except ValueError:
        values = [result]
    new = {fact for value in values for fact in _facts(value)} - _facts(message)
    if not new:
        return True
    shown = _facts(answer)
    return any(_same(a, fact) for a in shown for fact in new)


_FORM = re.compile(r"\A\s*(?:[a-z_]+:\s|[\[{\"])")
"""A result in a form, not words: ``added: Buy milk., items_now: 4`` (a JSON object as ``LocalModel`` shows it),
JSON."""


def fallback_answer(result: str) -> str:
    """What to say after a tool when the model would not: its result; as it is when it is already said in
    sentences (an action's ``format``: "Nothing is kept about you yet."), after "Done:" when it is a form. (Said
    as "Done: ...", a sentence was copied with its lead into the next answers.)"""
    if not result:
        return "Done."
    if not _FORM.match(result) and result.rstrip().endswith((".", "!", "?")):
        return result.strip()
    return f"Done: {result}"


_RAISED = re.compile(r"\Aerror: '[^']+' raised \w+: (?P<reason>\S.*)\Z", re.DOTALL)
"""A call whose handler raised (``core.handlers``): the handler's own words come after the exception's name."""
_RESULT_OF = r"(?:the|this) result of (?:the )?[\w-]+(?: (?:tool|call|action))?(?=\s*:)"
"""A lead that names a tool's result before copying it ("The result of recall: facts: ...")."""
_NARRATION = re.compile(
    rf"\b(?:the|this) (?:user|person|conversation|result says)\b|\b{_RESULT_OF}",
    re.IGNORECASE,
)


def failure_reason(result: str) -> str | None:
    """Why a tool failed in its handler's words, when ``result`` is a call whose handler raised; else None (a call
    refused by a plugin or by its schema: those errors are words to the model, not to the person)."""
    found = _RAISED.match(result)
    return " ".join(found["reason"].split()) if found else None


def result_note(tool: str, result: str) -> str:
    """How a tool's result is shown to the model, under the person's message it answers (``LocalModel._messages``):
    ``(the result of add_todo: added: Buy apples., items_now: 4)``."""
    return f"(the result of {tool}: {result})"


_NOTE = re.compile(r"\s*\(the result of [^:()]+: [^()]*\)", re.IGNORECASE)
"""A ``result_note`` the model copied from its prompt into its answer."""


def unnoted(answer: str) -> str:
    """``answer`` without the notes of a tool's result (``result_note``) it copied from its prompt: "You bought 2 kg
    of apples. (the result of add_todo: added: Buy 2 kg of apples., items_now: 4)" -> "You bought 2 kg of
    apples."."""
    cut, notes = _NOTE.subn("", answer)
    return cut.strip() if notes else answer


def _label(answer: str, result: str, *, lists_only: bool = False) -> re.Match[str] | None:
    """The lead of ``answer`` that copies the form of ``result`` (a JSON object): "Done:", or one of its keys (in
    the singular too) before a colon ("facts: ...", "Fact: ...", "Done: remembered: ..."); ``lists_only``: of its
    keys, only those that name a list ("facts:", not "remembered:", which says what was done)."""
    try:
        data = json.loads(result)
    except ValueError:
        return None
    keys = [
        re.escape(key.replace("_", " ").removesuffix("s"))
        for key, value in (data.items() if isinstance(data, dict) else ())
        if isinstance(key, str) and key and (isinstance(value, list) or not lists_only)
    ]
    names = "|".join(["done", *keys])
    return re.match(rf"\A[\s*#_]*(?:(?:{names})s?\s*:\s*)+", answer.replace("_", " "), re.IGNORECASE)


def labelled(answer: str, result: str) -> bool:
    """True when ``answer`` begins in the form the tool's ``result`` came in ("facts: Ana is your sister."), a copy
    of it rather than an answer."""
    return _label(answer, result) is not None


def unlabelled(answer: str, result: str) -> str:
    """``answer`` without the lead that copies the form of ``result`` where it says nothing ("Done:", the name of
    a list): "facts: Ana is your sister." -> "Ana is your sister."; "Added: Buy milk." and "facts: none" as they
    are."""
    lead = _label(answer, result, lists_only=True)
    rest = answer[lead.end() :].strip() if lead is not None else ""
    rest = re.sub(r'"\s*,\s*"', " ", rest.removeprefix("[").removesuffix("]").strip().strip('"'))  # (a list's items)
    if not rest or rest.casefold() == "none":
        return answer
    return rest[:1].upper() + rest[1:]


_LEAD = re.compile(r"\A\s*([^\W\d_][^:.!?\n]{0,40}):\s+\S")
"""The lead of a result said in sentences ("Kept for later: ...", "Forgotten for good: ..."): a few words and a
colon."""


def in_results_words(answer: str, result: str) -> str:
    """``answer``, or ``result`` itself when the answer starts with the lead ``result`` starts with (an action's
    ``format``: "Forgotten for good: Ana is your sister.") and goes on otherwise: a small model copies the form of
    the result with the facts of an earlier one ("Forgotten for good: You are a vegetarian.", the fact kept the line
    before). A result in a form (JSON, ``key: value``) is left to ``labelled``."""
    lead = _LEAD.match(result)
    if lead is None or _FORM.match(result):
        return answer
    if answer.strip().casefold().startswith(lead.group(1).casefold() + ":"):
        return result.strip()
    return answer


def narrates(answer: str) -> bool:
    """True when ``answer`` speaks of the person or the conversation in the third person, as an onlooker."""
    return bool(_NARRATION.search(answer))


_TELLING = re.compile(
    r"\A[\s*#_]*(?:(?:what )?(?:the|this) (?:result|conversation|tool)(?:'s (?:result|output))? "
    r"(?:says|shows|keeps|indicates|reports)(?: that)?|according to the (?:result|tool)|I was told(?: that)?"
    rf"|{_RESULT_OF})\s*[:,]?\s+",
    re.IGNORECASE,
)


_ASKED = re.compile(r"\A\s*(?:I was asked|you(?:'ve| have)? asked(?: me)?)\b[^.!?]*[.!?]\s+(?=\S)", re.IGNORECASE)
"""A first sentence that says again what the person asked, before the answer ("I was asked what time it is in
Tokyo right now. It is 19:53 ...")."""


def spoken(answer: str) -> str:
    """``answer`` without the leads that tell of the result or the conversation instead of saying it, at the start
    of any of its sentences: "The result says that the weather in Lisbon is light rain." -> "The weather in Lisbon
    is light rain."; "I searched your notes. The result says that no notes were found." -> "I searched your notes.
    No notes were found."; and without a first sentence that says again what was asked ("I was asked what day it
    is. It is Tuesday." -> "It is Tuesday.")."""
    asked = _ASKED.match(answer)
    answer = answer[asked.end() :] if asked is not None else answer
    return "".join(_told(part) for part in _SENTENCE_END.split(answer))


def _told(sentence: str) -> str:
    lead = _TELLING.match(sentence)
    if lead is None or not sentence[lead.end() :].strip():
        return sentence
    rest = sentence[lead.end() :]
    return rest[0].upper() + rest[1:]


_KEPT_LEADS = ("the conversation keeps", "this conversation keeps", "what this conversation keeps")
"""How an answer starts that copies what the compact prompt shows the conversation keeps (``Prompt.kept``); ``spoken``
cuts that lead."""


def copies_kept(head: str, kept: str = "") -> bool | None:
    """Whether an answer that starts with ``head`` copies what the prompt shows the conversation keeps (``kept``):
    with its lead ("The conversation keeps: Todo list: 1. buy milk ..." for "I'm flying to Lisbon on Friday."), or
    one of its lines of three words or more, word for word, with or without its list's mark ("Ana paid $30.00 for
    dinner." for "Carla bought the train tickets.", the state showing "- Ana paid 30.00 for dinner"), or with the
    label one of them starts with ("Todo list: Milk today" for "I bought milk today.": ``_LABEL``); None while
    ``head`` is too short to tell."""
    text = " ".join(head.lower().split()).lstrip("*#_ ")
    said = _words(head)
    leads, lines = _kept_starts(kept)
    if any(text.startswith(lead) for lead in leads) or (said and any(said.startswith(line) for line in lines)):
        return True
    if any(lead.startswith(text) for lead in leads) or any(line.startswith(said) for line in lines):
        return None
    return False


def _words(line: str) -> str:
    """``line``'s words and numbers (``_WORD``), lower case, without its list's mark."""
    return " ".join(_WORD.findall(_MARKER.sub("", line.lower(), count=1)))


@functools.lru_cache(maxsize=64)
def _kept_starts(kept: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """How a copy of ``kept`` may start: the leads (``_KEPT_LEADS`` and the labels of its lines) and its lines of
    three words or more (``_words``); worked out once for a state, not for every piece of an answer streamed."""
    labels = (label.group(0) for label in map(_LABEL.match, kept.lower().splitlines()) if label)
    lines = (_words(line) for line in kept.splitlines())
    return (*_KEPT_LEADS, *labels), tuple(line for line in lines if line.count(" ") > 1)


_LABEL = re.compile(r"[^\W\d_][\w' ]{0,30}:")
"""The label a line of the state starts with ("Todo list:", "Expenses:"): an answer that starts with it recites the
state ("Todo list: Milk today" for "I bought milk today.", the list empty)."""


LIST_MARK = r"(?:\d{1,3}[.)]|[-*\u2022])"
"""The mark of a list's item ("1.", "2)", "-", "*", "\u2022"), as a regular expression."""
_MARKER = re.compile(rf"\A[\s*#_]*{LIST_MARK}\s+")
"""The mark of a list's item at the start of a line ("1. ", "- "), which a copy may give or leave out."""
_WORD = re.compile(r"[^\W_]+(?:[.,:'][^\W_]+)*")
"""A word or a number ("30.00", "12:30", "person's") of an answer or of the state, without the signs around it."""


_IRREGULAR: dict[str, tuple[str, ...]] = {
    "begin": ("begun", "began"),
    "buy": ("bought",),
    "build": ("built",),
    "cut": ("cut",),
    "do": ("done", "did"),
    "find": ("found",),
    "forget": ("forgotten", "forgot"),
    "get": ("got",),
    "give": ("given", "gave"),
    "hold": ("held",),
    "keep": ("kept",),
    "leave": ("left",),
    "make": ("made",),
    "pay": ("paid",),
    "put": ("put",),
    "read": ("read",),
    "run": ("run", "ran"),
    "send": ("sent",),
    "set": ("set",),
    "split": ("split",),
    "take": ("taken", "took"),
    "tell": ("told",),
    "write": ("written", "wrote"),
}
"""Verbs whose forms that say them done are not the regular ones (``_done``): the past participle, then the simple
past where it differs."""
_DONE_BEFORE = (
    r"(?:\b(?:i|we)(?:'ve|'d| have| had)?|\b(?:has|have|had)(?: now| just| also)? been"
    r"|\b(?:is|are|was|were)(?: now| just| also)?|^)"
)
"""What says an action is done before its participle: "I added", "I've set", "has been booked", "was removed", or
the sentence's start ("Added call the bank to your list.")."""


def _done(verb: str) -> tuple[str, ...]:
    """The forms of ``verb`` that say it is done: its past participle, and the simple past where it differs."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb.endswith("e"):
        return (verb + "d",)
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou":
        return (verb[:-1] + "ied",)
    return (verb + "ed", verb + verb[-1] + "ed")  # (added; stopped)


@functools.lru_cache(maxsize=256)
def _claim_pattern(action: str) -> re.Pattern[str] | None:
    """What says ``action`` done (``claimed``), worked out once per name; None when its name starts with no verb."""
    verb = re.split(r"[_\-\s.:]+|(?<=[a-z])(?=[A-Z])", action.strip())[0].lower()
    if len(verb) < 2 or not verb.isalpha():
        return None
    forms = "|".join(map(re.escape, _done(verb)))
    adverbs = r"(?:\s+(?:just|also|now|already|successfully|gone ahead and))*"
    return re.compile(rf"{_DONE_BEFORE}{adverbs}\s*(?:{forms})\b", re.IGNORECASE)


def claimed(answer: str, actions: Sequence[str]) -> str | None:
    """The first of ``actions`` (tool names: ``add_todo``, ``bookTable``) that a sentence of ``answer`` says the bot
    did, with the verb the name starts with done in the first person, in the passive or opening the sentence: "I
    added `call the bank` to my list." claims ``add_todo``, "Your table has been booked." ``book_table``; None when
    no sentence does. A plain answer that claims an action nobody called (the decision said none, the answer
    imitates the conversation's earlier ones) tells the person something that did not happen."""
    sentences = [s.strip(" *_`\"'") for s in _SENTENCE_END.split(answer) if s.strip()]
    for name in actions:
        pattern = _claim_pattern(name)
        if pattern is not None and any(pattern.search(sentence) for sentence in sentences):
            return name
    return None


def sentences(text: str) -> int:
    """How many sentences ``text`` holds, the last one counted whole or not."""
    return len(_SENTENCE_END.split(text.strip())[::2])


def unclaimed(answer: str, action: str) -> str:
    """``answer`` without its sentences that claim ``action`` done (``claimed``)."""
    parts = _SENTENCE_END.split(answer)
    kept = [
        sentence + gap
        for sentence, gap in zip(parts[::2], [*parts[1::2], ""], strict=True)
        if not claimed(sentence, (action,))
    ]
    return "".join(kept).strip()


def failure_answer(reason: str) -> str:
    """What to say after a tool failed when the model's answer does not say why: the handler's reason."""
    return f"Sorry, I couldn't do that: {reason.rstrip('.')}."


class IdentityGuard:
    """Passes an answer on sentence by sentence, leaving out each sentence in which the bot claims a maker or a
    model name that ``persona`` does not give it; an answer left empty becomes the persona's first sentence in the
    first person. An incremental decoder: ``feed(chunk) -> text``, then ``close() -> text``."""

    def __init__(self, persona: str) -> None:
        self.persona = persona
        self._held = ""
        self._given = 0

    def _allowed(self, sentence: str) -> bool:
        claims = {m.lower().replace(" ", "") for m in _MAKERS.findall(sentence)}
        if not claims or not _FIRST_PERSON.search(sentence):
            return True
        own = {m.lower().replace(" ", "") for m in _MAKERS.findall(self.persona)}
        return claims <= own

    def _pass(self, sentence: str) -> str:
        if not self._allowed(sentence):
            return ""
        self._given += 1
        return sentence

    def feed(self, chunk: str) -> str:
        self._held += chunk
        *complete, self._held = _SENTENCE_END.split(self._held)
        text = ""
        for sentence, gap in zip(complete[::2], complete[1::2], strict=True):  # a sentence, the space after it
            passed = self._pass(sentence)
            if passed:
                text += passed + gap  # (a line break stays one: a turn the model invents is still cut)
        return text

    def close(self) -> str:
        last = self._pass(self._held) if self._held.strip() else ""
        self._held = ""
        if last or self._given:
            return last
        first = _SENTENCE_END.split(self.persona.strip())[0]
        if first.lower().startswith("you are "):
            return "I am " + first[len("you are ") :]
        return "I am the assistant of this chat."
