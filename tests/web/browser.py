"""A real headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium, for async tests.

Selenium blocks, and the servers under test run in the test's event loop, so every browser call runs in a thread
(``await browser.get(url)``). Screenshots go to the test's folder and, for the README, to ``docs/screenshots``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM = Path("/usr/bin/chromium")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
"""Where the README's screenshots are kept: refreshed when the browser tests run with ``SCREENSHOTS_UPDATE=1``
(otherwise a test run leaves the tracked files alone)."""

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1200,900",
    "--lang=en-US",
)


class Browser:
    """One Chromium window; each method runs the blocking Selenium call in a thread."""

    def __init__(self, profile: Path, shots: Path) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        self.driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        self.driver.set_page_load_timeout(20)
        self.shots = shots
        self.shots.mkdir(parents=True, exist_ok=True)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def get(self, url: str) -> None:
        await self.run(self.driver.get, url)

    async def source(self) -> str:
        return str(await self.run(lambda: self.driver.page_source))

    async def url(self) -> str:
        return str(await self.run(lambda: self.driver.current_url))

    async def text(self, css: str) -> str:
        from selenium.webdriver.common.by import By

        return str(await self.run(lambda: self.driver.find_element(By.CSS_SELECTOR, css).text))

    async def texts(self, css: str) -> list[str]:
        from selenium.webdriver.common.by import By

        return list(await self.run(lambda: [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)]))

    async def type(self, css: str, text: str) -> None:
        from selenium.webdriver.common.by import By

        await self.run(lambda: self.driver.find_element(By.CSS_SELECTOR, css).send_keys(text))

    async def click(self, css: str) -> None:
        from selenium.webdriver.common.by import By

        await self.run(lambda: self.driver.find_element(By.CSS_SELECTOR, css).click())

    async def accept_alert(self) -> None:
        await self.run(lambda: self.driver.switch_to.alert.accept())

    async def wait_for(self, predicate: Callable[[], Any], *, timeout: float = 15.0, what: str = "") -> Any:
        """Poll ``predicate`` (run in a thread, so it may call Selenium) until it returns something true."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = await self.run(predicate)
            except Exception:  # the element is not there yet
                found = None
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or predicate}")
            await asyncio.sleep(0.05)

    async def screenshot(self, name: str, *, full: bool = False) -> Path:
        """``<name>.png`` in the test's folder (copied to ``docs/screenshots`` with ``SCREENSHOTS_UPDATE=1``); ``full``: the whole page's height
        (up to 3000 pixels), not only the window's."""
        path = self.shots / f"{name}.png"

        def shoot() -> None:
            size = self.driver.get_window_size()
            if full:
                height = self.driver.execute_script("return document.documentElement.scrollHeight")
                self.driver.set_window_size(size["width"], min(int(height) + 140, 3000))
            try:
                self.driver.save_screenshot(str(path))
            finally:
                if full:
                    self.driver.set_window_size(size["width"], size["height"])

        await self.run(shoot)
        if os.environ.get("SCREENSHOTS_UPDATE") == "1":
            DOCS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, DOCS / path.name)
        return path

    def quit(self) -> None:
        self.driver.quit()
