"""URL sources and the ``bots knowledge`` command: pages served by a local HTTP server on 127.0.0.1 (HTML, a PDF,
Markdown as text/plain) are indexed and read again only when they changed, a page that answers 404 is removed, one
that fails is reported; and ``add``, ``list``, ``search``, ``scope``, ``reindex`` and ``remove`` run as commands
(``bots.cli.main``) on the bot's data folder."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bots.cli import main
from core.knowledge import Indexer, SQLiteKnowledge

from .support import CITE, FAQ_HTML, HANDBOOK, QUESTION, pdf_bytes, write_corpus


class Site:
    """Pages by path: (content type, body); a missing path answers 404, ``/broken`` 500."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {
            "/faq": ("text/html; charset=utf-8", FAQ_HTML.encode()),
            "/warranty.pdf": ("application/pdf", pdf_bytes(["Warranty lasts two years.", "Batteries: one year."])),
            "/guide.md": ("text/plain", HANDBOOK.encode()),
        }
        self.hits: list[str] = []
        self.redirects: dict[str, str] = {}
        """Paths answered 302 to a location."""
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.hits.append(self.path)
                if self.path == "/broken":
                    self.send_error(500)
                    return
                if self.path in site.redirects:
                    self.send_response(302)
                    self.send_header("Location", site.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                page = site.pages.get(self.path)
                if page is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", page[0])
                self.send_header("Content-Length", str(len(page[1])))
                self.end_headers()
                self.wfile.write(page[1])

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


@pytest.fixture
def site() -> Iterator[Site]:
    served = Site()
    served.thread.start()
    try:
        yield served
    finally:
        served.server.shutdown()
        served.server.server_close()
        served.thread.join(5)


async def test_urls_are_read_kept_up_to_date_and_removed_when_gone(site: Site, tmp_path: Path) -> None:
    store = SQLiteKnowledge(tmp_path / "k.sqlite3")
    try:
        indexer = Indexer(store, timeout=10)
        urls = [site.url(p) for p in ("/faq", "/warranty.pdf", "/guide.md", "/broken", "/nowhere")]
        report = await indexer.add(urls, collection="web")
        assert report.added == urls[:3]
        assert report.failed == [(urls[3], f"{urls[3]} answered 500"), (urls[4], "not found")]
        titles = {d.source: d.title for d in await store.documents("web")}
        assert titles == {urls[0]: "Acme FAQ", urls[1]: "warranty.pdf", urls[2]: "Acme Handbook"}

        [gift] = await indexer.search("how long are gift cards valid", limit=1)
        assert (gift.cite, gift.source) == ("Acme FAQ § Gift cards", urls[0])
        [warranty] = await indexer.search("warranty years", limit=1)
        assert warranty.cite == "warranty.pdf § page 1" and warranty.text == "Warranty lasts two years."
        [refund] = await indexer.search(QUESTION, limit=1)
        assert refund.cite == CITE  # text/plain named .md is read as Markdown, split at its headings

        site.pages["/faq"] = ("text/html", FAQ_HTML.replace("two years", "three years").encode())
        del site.pages["/warranty.pdf"]
        report = await indexer.reindex("web")
        assert (report.changed, report.removed, report.unchanged) == ([urls[0]], [urls[1]], [urls[2]])
        [gift] = await indexer.search("gift cards valid", limit=1)
        assert "three years" in gift.text
        assert sorted(d.source for d in await store.documents()) == sorted([urls[0], urls[2]])
    finally:
        await store.close()


def test_the_bots_knowledge_command(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BOT_DATA_DIR", str(tmp_path / "data"))
    for name in ("DATABASE_URL", "KNOWLEDGE_EMBED_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = write_corpus(tmp_path / "docs")
    faq = site.url("/faq")

    def run(*argv: str) -> tuple[int, str]:
        status = main(["knowledge", *argv])
        return status, capsys.readouterr().out

    status, out = run("add", str(folder / "handbook.md"), "--collection", "hr")
    assert status == 0 and out.splitlines()[-1] == "1 added, 0 changed, 0 unchanged, 0 removed, 0 failed"
    status, out = run("add", faq, site.url("/broken"), "--collection", "shop")
    assert status == 1 and f"failed: {site.url('/broken')}: " in out and "1 added" in out
    status, out = run("add", str(folder / "handbook.md"), "--collection", "hr")
    assert status == 0 and "1 unchanged" in out

    status, out = run("list")
    lines = out.splitlines()
    assert status == 0 and lines[-1] == "2 document(s)"
    assert lines[0].startswith("hr\t4 passages\t") and lines[0].endswith(f"\tAcme Handbook\t{folder / 'handbook.md'}")
    assert lines[1].startswith("shop\t2 passages\t") and lines[1].endswith(f"\tAcme FAQ\t{faq}")
    assert run("list", "--collection", "shop")[1].splitlines()[-1] == "1 document(s)"

    status, out = run("search", QUESTION)
    assert status == 0 and out.startswith(f"1. [hr] {CITE}\n   A refund is paid back")
    assert run("search", "gift cards", "--collection", "shop")[1].startswith("1. [shop] Acme FAQ § Gift cards")
    assert run("search", "zebra xylophone")[1] == "nothing found\n"

    status, out = run("scope", "telegram:chat:5", "shop", "hr")
    assert status == 0 and out == "telegram:chat:5 searches shop, hr\n"
    status, out = run("scope", "telegram:chat:5")
    assert out == "telegram:chat:5 searches every collection (KNOWLEDGE_COLLECTIONS)\n"

    (folder / "handbook.md").write_text(HANDBOOK.replace("five", "ten"), encoding="utf-8")
    status, out = run("reindex")
    assert status == 0 and out.splitlines()[-1] == "0 added, 1 changed, 1 unchanged, 0 removed, 0 failed"
    assert "ten working days" in run("search", QUESTION, "--limit", "1")[1]

    assert run("remove", "--collection", "hr")[0] == 2  # neither sources nor --all
    assert run("remove", str(folder / "handbook.md"), "--all", "--collection", "hr")[0] == 2  # both
    status, out = run("remove", str(folder / "handbook.md"), "--collection", "hr")
    assert status == 0 and out == "1 document(s) removed from hr\n"
    status, out = run("remove", str(folder / "handbook.md"), "--collection", "hr")
    assert status == 1 and out == "0 document(s) removed from hr\n"
    status, out = run("remove", "--all", "--collection", "shop")
    assert status == 0 and out == "1 document(s) removed from shop\n"
    assert run("list")[1] == "0 document(s)\n"
    assert (tmp_path / "data" / "knowledge.sqlite3").is_file()
