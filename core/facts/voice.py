"""How a fact reads to whom it is told: a fact is kept in its owner's words ("Ana is my sister."), and a model
shown those words while it answers the owner reads "my" as its own or the owner as the sister ("You're right. I
remember that you are Ana's sister."). Shown to its owner, a fact is turned to the second person first ("Ana is
your sister."); shown to anyone else, it stays as said.

Only the words of the first person change (and "the user", as the ``remember`` example writes a fact), with the
verb that follows them where it changes too ("I am" → "you are", "I was" → "you were"); everything else, "you"
included, is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .model import Fact

__all__ = ("as_told", "second_person")

_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")

_PRONOUNS = {
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "i'm": "you're",
    "i've": "you've",
    "i'll": "you'll",
    "i'd": "you'd",
}
_AFTER_SUBJECT = {"am": "are", "was": "were", "is": "are", "has": "have", "wasn't": "weren't", "isn't": "aren't"}
"""The verb after a subject turned to "you" ("I am", "the user is")."""

_THE_USER = re.compile(r"\b(the user)(['’]s)?\b", re.IGNORECASE)


def _cased(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def second_person(text: str) -> str:
    """``text`` (a fact in the words of who said it) as said to them: "my sister" → "your sister", "I am" → "you
    are", "The user's name is Ada" → "Your name is Ada"."""
    text = _THE_USER.sub(lambda m: _cased("your" if m.group(2) else "you", m.group(1)), text)
    out: list[str] = []
    end = 0
    subject = False  # the word before was a subject now "you" (its verb follows it)
    for match in _WORD.finditer(text):
        word = match.group()
        key = word.casefold().replace("’", "'")
        if key in _PRONOUNS:
            new = _PRONOUNS[key]
            if key.startswith("i"):  # "I" is written in capitals anywhere, "you" only where a sentence begins
                before = text[: match.start()].rstrip()
                new = _cased(new, "Y" if not before or before.endswith((".", "!", "?", ":", '"')) else "y")
            else:
                new = _cased(new, word)
            new = new.replace("'", "’") if "’" in word else new
        elif subject and key in _AFTER_SUBJECT:
            new = _cased(_AFTER_SUBJECT[key], word)
        else:
            new = word
        out.append(text[end : match.start()] + new)
        end = match.end()
        subject = key in ("i", "you")
    out.append(text[end:])
    return "".join(out)


def as_told(fact: Fact, askers: Sequence[str]) -> str:
    """The text of ``fact`` as shown to the model answering ``askers``: in the second person when they are one
    person, its owner; else as said."""
    if fact.owner is not None and list(askers) == [fact.owner]:
        return second_person(fact.text)
    return fact.text
