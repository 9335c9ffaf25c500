"""The documentation site builds with ``--strict`` (what ``make docs`` runs), its generated reference pages hold
every setting, command and public name, and in headless Chromium its search finds ``TELEGRAM_TOKEN``.

The built site is served by ``http.server`` on 127.0.0.1 (the search loads its index with a request, which
``file://`` pages may not make). Without mkdocs installed (the ``docs`` extra) the tests are skipped, saying so.
"""

from __future__ import annotations

import asyncio
import functools
import http.server
import importlib.util
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import core
from bots.explain import setting_entries
from tests.web.browser import CHROMEDRIVER, CHROMIUM, Browser

from .blocks import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
    reason="mkdocs is not installed: pip install -e '.[docs]' (make install does)",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for the module as ``make docs`` builds it."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(out)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_reference_pages_are_generated_from_the_code(site: Path) -> None:
    settings = (site / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    for entry in setting_entries():
        assert entry.name in settings, f"{entry.name} is missing from the settings reference"
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("run", "chat", "config", "gateway", "worker", "new"):
        assert f'id="bots-{command}"' in cli, f"bots {command} is missing from the CLI reference"
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in core.__all__:
        assert f'id="core.{name}"' in api, f"core.{name} is missing from the API reference"
    assert "bots:{telegram:42}:inbox" in (site / "reference" / "redis-keys" / "index.html").read_text()
    assert "bots_messages_received_total" in (site / "reference" / "metrics" / "index.html").read_text()


def test_llms_txt_lists_every_page(site: Path) -> None:
    llms = (site / "llms.txt").read_text(encoding="utf-8")
    assert llms.startswith("# daydreams-bots\n\n> ")
    for link in ("/tutorials/first-bot/", "/how-to/deploy/", "/explanation/guarantees/", "/reference/settings/"):
        assert f"]({link})" in llms
    full = (site / "llms-full.txt").read_text(encoding="utf-8")
    assert "TELEGRAM_TOKEN" in full
    assert "::: core." not in full, "the API reference is written out in llms-full.txt, not left as ::: lines"
    for name in core.__all__:
        assert f"### `{name}" in full, f"core.{name} is missing from llms-full.txt"
    assert "- `from_platform`: `Callable[[PlatformChat], ArgsT] | None`: A bot's context laid over" in full


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("needs Debian's chromium and chromium-driver (.ci/run installs them)")
    opened = await asyncio.to_thread(Browser, tmp_path / "profile", tmp_path / "shots")
    try:
        yield opened
    finally:
        await asyncio.to_thread(opened.quit)


async def test_the_site_opens_and_its_search_finds_telegram_token(served: str, browser: Browser) -> None:
    await browser.get(served)
    assert "daydreams-bots" in await browser.run(lambda: browser.driver.title)
    await browser.click("input.md-search__input")  # in the header at this width (a label opens it on phones)
    await browser.type("input.md-search__input", "TELEGRAM_TOKEN")
    found = await browser.wait_for(
        lambda: [t for t in (e.text for e in _results(browser)) if "TELEGRAM_TOKEN" in t],
        timeout=20,
        what="a search result naming TELEGRAM_TOKEN",
    )
    assert found
    titles = await browser.texts(".md-search-result__item h1, .md-search-result__item h2")
    assert any("Settings" in t or "Telegram" in t for t in titles), titles


def _results(browser: Browser) -> list[object]:
    from selenium.webdriver.common.by import By

    return list(browser.driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item"))
