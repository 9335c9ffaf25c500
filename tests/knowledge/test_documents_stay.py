"""Documents stay where the operator put them (issue 49, point 5): a file of a folder that links out of it is not
indexed (nor read again by ``reindex`` once it became such a link), and a URL's redirect is followed only to http(s)
and never to a loopback, link-local or private address unless the operator allows it (``allow_private``). The
pages are served on 127.0.0.1, so the refusal is what the default exercises; the allowed case sets it."""

from __future__ import annotations

from pathlib import Path

from core.knowledge import Indexer, SQLiteKnowledge

from .support import HANDBOOK
from .test_sources_and_cli import Site, site  # noqa: F401 (the fixture)

SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI"


async def test_a_symlink_out_of_the_folder_is_not_indexed_on_add_or_reindex(tmp_path: Path) -> None:
    outside = tmp_path / "credentials.md"
    outside.write_text(f"# Keys\n\n{SECRET}\n", encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    (docs / "notes.md").symlink_to(outside)
    (docs / "inner.md").symlink_to(docs / "handbook.md")  # a link within the folder: the file it is, once
    store = SQLiteKnowledge(tmp_path / "k.sqlite3")
    try:
        indexer = Indexer(store)
        report = await indexer.add([str(docs)], collection="hr")
        assert report.added == [str((docs / "handbook.md").resolve())]
        assert report.failed == [(str(docs / "notes.md"), f"leads out of {docs}: not indexed")]
        assert await indexer.search("AWS secret access key") == []

        (docs / "handbook.md").unlink()  # the indexed file becomes a link out of the folder
        (docs / "handbook.md").symlink_to(outside)
        report = await indexer.reindex("hr")
        stored = str(docs.resolve() / "handbook.md")
        assert report.changed == [] and report.failed == [
            (stored, f"{stored} is now a link to another file: not read; add that file itself")
        ]
        assert await indexer.search("AWS secret access key") == []
    finally:
        await store.close()


async def test_a_redirect_to_a_loopback_address_is_refused_unless_allowed(site: Site, tmp_path: Path) -> None:  # noqa: F811
    site.pages["/internal.md"] = ("text/plain", f"# Keys\n\n{SECRET}\n".encode())
    site.redirects["/to-internal"] = site.url("/internal.md")
    site.redirects["/to-file"] = "file:///etc/passwd"
    store = SQLiteKnowledge(tmp_path / "k.sqlite3")
    try:
        refused = await Indexer(store, timeout=10).add([site.url("/to-internal"), site.url("/to-file")])
        assert refused.added == []
        [(_, internal), (_, scheme)] = refused.failed
        assert "a loopback, link-local or private address: not followed" in internal
        assert "KNOWLEDGE_ALLOW_PRIVATE_URLS" in internal
        assert "only http(s) is followed" in scheme
        assert "/internal.md" not in site.hits and await store.documents() == []

        allowed = await Indexer(store, timeout=10, allow_private=True).add([site.url("/to-internal")])
        assert allowed.added == [site.url("/to-internal")]  # the operator allows an intranet's documents
        refused_again = await Indexer(store, timeout=10, allow_private=True).add([site.url("/to-file")])
        assert "only http(s) is followed" in refused_again.failed[0][1]  # never another scheme
    finally:
        await store.close()
