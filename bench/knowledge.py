"""Knowledge base benchmark: retrieval quality and search time, full-text search alone (no embedding model).

The document set is made here, deterministically (seed 41): product manuals of made-up products, each a Markdown
document with ten sections (warranty, battery, charging, price, shipping, returns, cleaning, compatibility,
safety, support), each section a fact about that product among sentences every manual shares. The question set
asks about one section of one product each, in other words than the section's where a user would (a quarter of
the questions share no word with the right section but the product's name: "how much does the X cost?" for
"priced at ... euros"). The documents go through the real splitter (``core.knowledge.split_markdown``) into the
real store (``SQLiteKnowledge``; ``--postgres URL`` measures ``PostgresKnowledge`` too).

- top-3 retrieval: the share of questions whose right passage (document and section) is among the 3 found;
- time per search (through the store's async API, the worker thread included), p50 and p95 over 300 questions,
  at 10,000 and 100,000 passages.

Prints figures; asserts nothing. Run: python bench/knowledge.py [--sizes 10000,100000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# bench/ holds a file named like the project's package (core.py): keep it off the import path, the project on it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.knowledge import KnowledgeStore, SQLiteKnowledge, split_markdown  # noqa: E402

SECTIONS_PER_DOC = 10
QUESTIONS = 300

KINDS = ["kettle", "drill", "router", "speaker", "camera", "blender", "scooter", "lamp", "heater", "printer"]

SHARED = [
    "Read this manual before first use and keep it for later.",
    "Our support team answers on working days.",
    "Images in this manual may differ slightly from your product.",
    "Register your product online to hear about updates.",
    "Keep the packaging until you are sure you keep the product.",
    "Specifications may change without notice.",
    "This product is designed and tested in Europe.",
    "Never open the housing yourself.",
]

# (section title, passage template, question templates); {p} the product, {n}/{m} numbers
FACTS = [
    (
        "Warranty",
        "The {p} comes with a {n}-year warranty that covers manufacturing defects; wear and accidental damage are "
        "excluded.",
        ["What warranty does the {p} have?", "Is the {p} covered by a warranty, and for how long?"],
    ),
    (
        "Battery",
        "A full charge of the {p} battery lasts about {n} hours of continuous use; cold weather shortens it.",
        ["How many hours does the {p} battery last?", "What battery life can I expect from the {p}?"],
    ),
    (
        "Charging",
        "Charge the {p} with the supplied USB-C cable; it reaches 80 percent in {n} minutes and full in {m}.",
        ["How long does the {p} take to charge?", "Which cable charges the {p}?"],
    ),
    (
        "Price",
        "The {p} is priced at {n} euros including VAT; spare parts are sold separately.",
        ["How much does the {p} cost?", "What is the price of the {p}?"],
    ),
    (
        "Shipping",
        "Orders of the {p} leave our warehouse within {n} days; express delivery takes one day more to arrive.",
        ["When will my {p} order be shipped?", "How fast is delivery of the {p}?"],
    ),
    (
        "Returns",
        "You may send the {p} back within {n} days of delivery for a full refund, in its original packaging.",
        ["Can I return the {p} and get a refund?", "How many days do I have to send the {p} back?"],
    ),
    (
        "Cleaning",
        "Wipe the {p} with a soft damp cloth; do not use solvents or put it in the dishwasher. Descale every {n} "
        "weeks.",
        ["How should I clean the {p}?", "Can the {p} go in the dishwasher?"],
    ),
    (
        "Compatibility",
        "The {p} works with the {m} app on Android and iOS, and with accessories of the series {n}.",
        ["Which app works with the {p}?", "Is the {p} compatible with iPhone?"],
    ),
    (
        "Safety",
        "Keep the {p} away from children and water; unplug it before any maintenance. It shuts off above {n} degrees.",
        ["Is the {p} safe near water?", "At what temperature does the {p} shut off?"],
    ),
    (
        "Support",
        "For help with the {p}, call {n} or write to the support desk; have your serial number ready.",
        ["Who do I contact for help with my {p}?", "What is the support phone number of the {p}?"],
    ),
]


def names(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct made-up product names (two syllable words and a kind: ``Valmo Trex kettle``)."""
    syllables = ["va", "lo", "mi", "tre", "xo", "ka", "ru", "zen", "pi", "dor", "qua", "fel", "nor", "sti", "bel"]
    found: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        first = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))).capitalize()
        second = "".join(rng.choice(syllables) for _ in range(2)).capitalize()
        name = f"{first} {second} {rng.choice(KINDS)}"
        if name not in found:
            found.add(name)
            out.append(name)
    return out


def manual(product: str, rng: random.Random) -> str:
    """The Markdown manual of ``product``."""
    parts = [f"# {product} manual", "", rng.choice(SHARED), ""]
    for title, fact, _ in FACTS:
        values = {"p": product, "n": rng.randint(2, 90), "m": rng.choice(["Home", "Link", "Go", "Hub"]) + "Control"}
        filler = " ".join(rng.sample(SHARED, 2))
        parts += [f"## {title}", "", fact.format(**values) + " " + filler, ""]
    return "\n".join(parts)


async def fill(store: KnowledgeStore, products: list[str], rng: random.Random) -> float:
    started = time.perf_counter()
    for product in products:
        parsed = split_markdown(manual(product, rng), title=product)
        await store.put(
            collection="bench", source=product, title=parsed.title, digest=product, passages=parsed.passages
        )
    return time.perf_counter() - started


async def measure(store: KnowledgeStore, products: list[str], rng: random.Random) -> tuple[float, float, float]:
    """Top-3 retrieval share, p50 and p95 ms per search."""
    right = 0
    times: list[float] = []
    for _ in range(QUESTIONS):
        product = rng.choice(products)
        title, _, questions = rng.choice(FACTS)
        question = rng.choice(questions).format(p=product)
        started = time.perf_counter()
        hits = await store.search(question, limit=3)
        times.append((time.perf_counter() - started) * 1000)
        right += any(h.source == product and h.section == title for h in hits)
    times.sort()
    return right / QUESTIONS, statistics.median(times), times[int(len(times) * 0.95)]


async def run(label: str, store: KnowledgeStore, passages: int) -> None:
    rng = random.Random(41)
    products = names(passages // SECTIONS_PER_DOC, rng)
    try:
        seconds = await fill(store, products, rng)
        quality, p50, p95 = await measure(store, products, random.Random(7))
        print(
            f"{label:>10} {passages:>10,} {seconds:>9.1f} {quality * 100:>9.1f}% {p50:>9.2f} {p95:>9.2f}",
            flush=True,
        )
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="passage counts, comma-separated")
    parser.add_argument("--postgres", default="", help="a PostgreSQL URL to measure too (an empty database)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"knowledge base, full-text search alone; {QUESTIONS} questions, top-3 retrieval and time per search")
    print(f"{'store':>10} {'passages':>10} {'index s':>9} {'top-3':>10} {'p50 ms':>9} {'p95 ms':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            await run("SQLite", SQLiteKnowledge(Path(folder) / f"k{size}.sqlite3"), size)
    if args.postgres:
        from core.knowledge.postgres import PostgresKnowledge

        for size in sizes:
            store = PostgresKnowledge(args.postgres, timeout=600)
            await store.remove("bench")
            await run("PostgreSQL", store, size)


if __name__ == "__main__":
    asyncio.run(main())
