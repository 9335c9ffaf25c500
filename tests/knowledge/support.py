"""What the knowledge tests share: a small handbook, a PDF made here, and a scripted model that answers from what
``search_knowledge`` returned, citing it."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from core import ScriptedModel
from core.knowledge import Indexer, SQLiteKnowledge
from core.models.base import ModelRequest

HANDBOOK = """# Acme Handbook

Welcome to Acme. This handbook says how we work.

## Refunds

A refund is paid back to the original card within five working days of the return being received.

## Shipping

Parcels leave the warehouse on Mondays and Thursdays. Express delivery costs 9 euros.

## Holidays

Every employee has 27 days of paid leave a year; ask your manager two weeks ahead.
"""

FAQ_HTML = """<html><head><title>Acme FAQ</title><style>p{}</style></head><body>
<nav>Home | Shop</nav>
<h1>Acme FAQ</h1>
<h2>Opening hours</h2><p>The shop opens from 9:00 to 18:00, Monday to Saturday.</p>
<h2>Gift cards</h2><p>Gift cards are valid for <b>two years</b>.</p>
</body></html>"""

QUESTION = "How long does a refund take?"
CITE = "Acme Handbook § Refunds"


def write_corpus(folder: Path) -> Path:
    """The handbook (Markdown) and the FAQ (HTML) in ``folder``; returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    (folder / "faq.html").write_text(FAQ_HTML, encoding="utf-8")
    return folder


def pdf_bytes(pages: Sequence[str]) -> bytes:
    """A PDF of ``pages`` (one line of Helvetica each), written by hand: no PDF library makes text."""
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def cites(output_type: str, question: str = QUESTION) -> object:
    """A scripted model's replies: first it calls ``search_knowledge`` with ``question``; then it answers with the
    first passage the action returned (or the prompt's knowledge block shows), and its citation."""

    def reply(request: ModelRequest) -> str:
        found = re.search(r'<action_result name="search_knowledge"[^>]*>(.*?)</action_result>', request.prompt, re.S)
        if found is not None:
            data = json.loads(found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
            first = data["passages"][0]
            return _say(output_type, f"{first['text']} (Source: {first['cite']})")
        shown = re.search(r'<passage cite="([^"]*)">(.*?)</passage>', request.prompt, re.S)
        if shown is not None:
            return _say(output_type, f"{shown.group(2)} (Source: {shown.group(1)})")
        call = json.dumps({"query": question})
        return f'<response><action_call name="search_knowledge">{call}</action_call></response>'

    return reply


async def two_collections(folder: Path) -> SQLiteKnowledge:
    """A knowledge base in ``folder``: the handbook in the collection hr, the FAQ in shop."""
    store = SQLiteKnowledge(folder / "knowledge.sqlite3")
    corpus = write_corpus(folder / "docs")
    indexer = Indexer(store)
    await indexer.add([str(corpus / "handbook.md")], collection="hr")
    await indexer.add([str(corpus / "faq.html")], collection="shop")
    return store


def searcher(output_type: str, found: list[list[str]]) -> ScriptedModel:
    """For each question: searches the knowledge base, then says how many passages it found (and appends their
    citations to ``found``)."""
    asked: list[int] = []

    def reply(request: ModelRequest) -> str:
        asked.append(1)
        if len(asked) % 2:  # a question: search
            call = json.dumps({"query": "refund gift cards"})
            return f'<response><action_call name="search_knowledge">{call}</action_call></response>'
        results = re.findall(r'<action_result name="search_knowledge"[^>]*>(.*?)</action_result>', request.prompt, re.S)
        data = json.loads(results[-1].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
        found.append([p["cite"] for p in data["passages"]])
        return _say(output_type, f"found {data['found']}")

    return ScriptedModel(reply)


def _say(output_type: str, text: str) -> str:
    return f'<response><output type="{output_type}">{text}</output></response>'
