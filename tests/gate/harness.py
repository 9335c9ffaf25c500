"""The release gate's runner: the installed ``bots`` program (``.venv/bin/bots``) started as people start it, with
the environment an operator sets, in a folder of its own, and one conversation held with it on each platform.

A ``Cell`` is one combination of the settings that change a message's path (``tests.gate.matrix.DIMENSIONS``);
``run_cell`` starts what the cell names (``bots run``, or ``bots gateway`` and two ``bots worker`` on a
redis-server it starts; the embedded model with its real weights or the hosted fake, ``tests.gate.echo_model``) and
holds ``converse`` on each of its platforms:

1. a first message, answered;
2. a second that needs the first: with the hosted fake, the second request's prompt shows the first exchange (the
   message and the bot's answer); with the embedded model, the answer names what the first message said;
3. a group where two people speak (a Telegram group, a Discord server channel; on the web chat two visitors at
   once; the terminal has one person): both answered. With the hosted fake the second person speaks while the
   first is being answered (the model holds that request), so the busy policy decides what happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.bots_fleet import Process, env_for
from tests.fleet.server import RedisServer

from .echo_model import EchoModel, heard, marker
from .platforms import ANN, BOB, DEADLINE, Chat, TerminalChat, WebChat, started, wait_until

__all__ = ("BOTS", "Cell", "Deployment", "InstalledProcess", "cell_folder", "converse", "deployed", "run_cell")

BOTS = Path(sys.executable).with_name("bots")
"""The installed program (``make install`` puts it in ``.venv/bin``)."""
PLAIN_BOT = Path(__file__).with_name("plain_bot.py")
"""The bot with no plugin (the plugin set ``none``)."""


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One combination of the settings that change a message's path."""

    platforms: tuple[str, ...]
    """Where people talk to it (``tests.gate.platforms.PLATFORMS``)."""
    model: str = "hosted"
    """``embedded``: the default local model and its real weights; ``hosted``: the OpenAI-compatible fake."""
    deployment: str = "process"
    """``process``: ``bots run``; ``fleet``: ``bots gateway`` and two ``bots worker`` on a real Redis."""
    env: tuple[tuple[str, str], ...] = ()
    """More settings an operator sets (``BOT_BUSY``, ``BOT_QUIET_MS``...); the defaults otherwise."""
    labels: tuple[tuple[str, str], ...] = ()
    """The matrix's names of those settings' values (``("busy", "queue")``)."""
    plugins: str = "assistant"
    """The APP: ``none`` (a bot without plugins), ``new`` (what ``bots new`` writes), ``assistant`` (the built-in
    one, no APP given)."""
    store: str = "sqlite"
    """The memory store: ``sqlite`` (the default) or ``postgres`` (``DATABASE_URL``)."""
    browser: bool = False
    """Also hold one exchange in a headless Chromium on the web chat (needs ``web`` among the platforms)."""

    @property
    def name(self) -> str:
        parts = ["+".join(self.platforms), self.model, self.deployment, f"plugins-{self.plugins}", self.store]
        return "-".join(parts + [f"{name}-{value}" for name, value in self.labels])


SETTLE = 2.0
"""Seconds a chat must show the same replies to count as settled (Telegram's live replies are edited at most
every 1.5 s)."""
SEED = "2026"
"""``LLM_SEED`` of the embedded model's cells: it samples as people run it (``LLM_TEMPERATURE``), but the same way
each run, so that the check of its words (the second answer names the first message's colour) does not pass or fail
with the draw (one run in some ten answered "I don't have enough information" before)."""
QUIET_MS = "300"
"""The quiet window of ``quiet=on``: short, so the matrix stays quick, long enough to join a burst."""


class InstalledProcess(Process):
    """``tests.bots_fleet.Process`` started as people start it: the installed ``bots`` program (not ``python -m``),
    its standard input a terminal when given one."""

    def __init__(self, *args: Any, terminal: TerminalChat | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.terminal = terminal

    async def start(self) -> None:
        tty = self.terminal.slave if self.terminal is not None else None
        self.proc = await asyncio.create_subprocess_exec(
            str(BOTS),
            self.command,
            *([self.app] if self.app is not None else []),
            stdin=tty if tty is not None else asyncio.subprocess.DEVNULL,
            stdout=tty if tty is not None else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            env=self.env,
        )
        if self.terminal is not None:
            self.terminal.start_reading()

    async def wait_long(self, text: str) -> None:
        """``wait_for`` over several of its bounds (the embedded model loads and warms up first)."""
        for _ in range(10):
            with contextlib.suppress(TimeoutError):
                await self.wait_for(text)
                return
        raise AssertionError(f"bots {self.command} did not log {text!r}: {self.lines[-5:]}")


@dataclass
class Deployment:
    """The started processes of a cell."""

    processes: list[InstalledProcess] = field(default_factory=list)

    async def answered(self, metric: str) -> float:
        """``bots_messages_answered_total`` of platform ``metric``, summed over the processes."""
        total = 0.0
        pattern = re.compile(rf'^bots_messages_answered_total\{{platform="{re.escape(metric)}"\}} (\S+)$', re.M)
        async with aiohttp.ClientSession() as http:
            for process in self.processes:
                with contextlib.suppress(aiohttp.ClientError):
                    status, text = await process.get(http, "/metrics")
                    if status == 200:
                        total += sum(float(v) for v in pattern.findall(text))
        return total


def _app(cell: Cell, folder: Path) -> str | None:
    if cell.plugins == "none":
        return str(PLAIN_BOT)
    if cell.plugins == "new":
        from bots.scaffold import new_bot

        return str(new_bot("gatebot", where=folder))
    return None


def settings_of(cell: Cell, chats: Sequence[Chat], model: EchoModel | None, services: dict[str, str]) -> dict[str, str]:
    """The environment an operator sets for the cell."""
    env: dict[str, str] = {"LOG_LEVEL": "INFO", "WEB_PORT": "0", **services}
    for chat in chats:
        env.update(chat.settings())
    if model is not None:
        env.update(LLM_PROVIDER="openai", LLM_BASE_URL=model.url, LLM_API_KEY="sk-test", LLM_MODEL="fake-model")
    else:
        env["LLM_PROVIDER"] = "local"  # (the default; env_for sets the tests' scripted one)
        env["LLM_SEED"] = SEED
    env.update(cell.env)
    return env


@contextlib.asynccontextmanager
async def deployed(
    cell: Cell, chats: Sequence[Chat], model: EchoModel | None, folder: Path, services: dict[str, str]
) -> AsyncIterator[Deployment]:
    """The cell's processes, started and ready; stopped with SIGTERM after (each must exit 0)."""
    env = env_for(folder, **settings_of(cell, chats, model, services))
    if "BOT_QUIET_MS" not in dict(cell.env):
        del env["BOT_QUIET_MS"]  # (the default quiet window, as people run it; env_for sets the tests' 0)
    app = _app(cell, folder)
    terminal = next((c for c in chats if isinstance(c, TerminalChat)), None)
    deployment = Deployment()
    try:
        if cell.deployment == "fleet":
            gateway = InstalledProcess("gateway", env, folder, app=app)
            workers = [InstalledProcess("worker", {**env, "HTTP_PORT": _port()}, folder, app=app) for _ in range(2)]
            deployment.processes = [gateway, *workers]
            for process in deployment.processes:
                await process.start()
            await gateway.wait_long("gateway listening")
            for worker in workers:
                await worker.wait_long("worker ready")
        else:
            bot = InstalledProcess("run", env, folder, app=app, terminal=terminal)
            deployment.processes = [bot]
            await bot.start()
            if terminal is None:
                await bot.wait_long("ready with")
        for chat in chats:
            if isinstance(chat, WebChat):
                await chat.open()
        yield deployment
        codes = await asyncio.gather(*(p.terminate() for p in deployment.processes))
        assert codes == [0] * len(codes), [p.lines[-3:] for p in deployment.processes]
        for process in deployment.processes:
            errors = [line for line in process.lines if line.get("level") in ("ERROR", "CRITICAL")]
            assert not errors, errors
    finally:
        for process in deployment.processes:
            if process.proc is not None and process.proc.returncode is None:
                process.proc.kill()
                await process.proc.wait()


def _port() -> str:
    from tests.fleet.server import free_port

    return str(free_port())


async def settled(chat: Chat, person: int, *, group: bool = False) -> None:
    """Wait until what ``person`` sees stops changing (a live reply's last edit is sent after its run ends)."""
    shown, since = chat.texts(person, group=group), asyncio.get_running_loop().time()
    async with asyncio.timeout(DEADLINE):
        while asyncio.get_running_loop().time() - since < SETTLE:
            await asyncio.sleep(0.1)
            now = chat.texts(person, group=group)
            if now != shown:
                shown, since = now, asyncio.get_running_loop().time()


async def _answer(chat: Chat, deployment: Deployment, person: int, text: str, *, group: bool = False) -> str:
    """``person`` says ``text`` and waits for the run answering it to deliver; the replies they see since."""
    before = len(chat.texts(person, group=group))
    counted = await deployment.answered(chat.metric) if not isinstance(chat, TerminalChat) else 0.0
    await chat.say(person, text, group=group)
    await wait_until(
        lambda: len(chat.texts(person, group=group)) > before,
        f"an answer to {text!r} on {chat.name}",
        timeout=DEADLINE * 3,  # (the embedded model on a loaded machine)
    )
    if not isinstance(chat, TerminalChat):
        async with asyncio.timeout(DEADLINE * 3):
            while await deployment.answered(chat.metric) <= counted:
                await asyncio.sleep(0.1)
        await settled(chat, person, group=group)
    return "\n".join(chat.texts(person, group=group)[before:])  # (a long answer may come in several messages)


async def converse(
    chat: Chat, deployment: Deployment, model: EchoModel | None, *, recall: bool = True
) -> dict[str, str]:
    """The gate's conversation on ``chat`` (see the module's docstring); what the bot answered, by step.
    ``recall=False``: the embedded model's second answer need only be an answer (see ``_converse_embedded``)."""
    if model is None:
        return await _converse_embedded(chat, deployment, recall=recall)
    first, second = marker(), marker()
    one = await _answer(chat, deployment, ANN, f"Hello, my name is Ada. {first}")
    assert first in one, one
    two = await _answer(chat, deployment, ANN, f"What is my name? {second}")
    assert heard(two) == [first, second], two
    prompt = model.prompt_with(second)
    assert f"Hello, my name is Ada. {first}" in prompt and f"Heard {first}." in prompt, prompt
    shown = {"first": one, "second": two}
    if isinstance(chat, TerminalChat):
        return shown
    ann, bob = marker(), marker()
    group = chat.has_group
    model.hold(ann, until=bob)  # Bob speaks while Ann is being answered
    await chat.say(ANN, f"Ann here, a question. {ann}", group=group)
    await model.held()
    await chat.say(BOB, f"Bob here, me too. {bob}", group=group)
    await asyncio.sleep(0.3)  # (Bob's message reaches the bot while Ann's answer is held; any order is valid)
    model.release()

    def both() -> bool:
        seen = " ".join(chat.texts(ANN, group=group) + chat.texts(BOB, group=group))
        return ann in seen and bob in seen

    await wait_until(both, f"answers to both people on {chat.name}")
    await settled(chat, ANN, group=group)
    notices = [t for t in chat.texts(ANN, group=group) + chat.texts(BOB, group=group) if "Heard" not in t]
    assert not notices, f"the bot said more than the model's answers: {notices}"
    shown["group"] = " | ".join(chat.texts(ANN, group=group)[-2:] + ([] if group else chat.texts(BOB)[-1:]))
    return shown


async def _converse_embedded(chat: Chat, deployment: Deployment, *, recall: bool = True) -> dict[str, str]:
    """The conversation with the real model: its words are its own, so what is checked is that each message is
    answered (a reply, not the error notice) and, with ``recall``, that the second answer uses the first message.
    ``bots new``'s bot is a to-do list whose tools steer the small model: asked the colour, it once described its
    list instead, so there only the answers are checked (the hosted fake checks its prompt)."""
    one = await _answer(chat, deployment, ANN, "Hello! My favourite colour is green.")
    two = await _answer(chat, deployment, ANN, "What is my favourite colour?")
    for text in (one, two):
        assert text.strip() and "something went wrong" not in text.lower(), text
    assert not recall or "green" in two.lower(), f"the second answer does not use the first message: {two!r}"
    shown = {"first": one, "second": two}
    if isinstance(chat, TerminalChat):
        return shown
    group = chat.has_group
    ann = await _answer(chat, deployment, ANN, "Hi, I am Ann. What is 2 + 2?", group=group)
    bob = await _answer(chat, deployment, BOB, "And I am Bob. Say hello to me.", group=group)
    for text in (ann, bob):
        assert text.strip() and "something went wrong" not in text.lower(), text
    shown["group"] = f"{ann} | {bob}"
    return shown


@contextlib.asynccontextmanager
async def _services(cell: Cell, folder: Path, database_url: str | None) -> AsyncIterator[dict[str, str]]:
    """The servers the cell needs: a redis-server for a fleet, a PostgreSQL database for ``postgres``."""
    services: dict[str, str] = {}
    redis: RedisServer | None = None
    if cell.store == "postgres":
        assert database_url is not None, "a postgres cell needs a database"
        services["DATABASE_URL"] = database_url
    if cell.deployment == "fleet":
        redis = RedisServer(folder / "redis")
        redis.start()
        services["REDIS_URL"] = redis.url
    try:
        yield services
    finally:
        if redis is not None:
            redis.stop()


async def run_cell(cell: Cell, folder: Path, *, database_url: str | None = None) -> dict[str, dict[str, str]]:
    """Start what ``cell`` names in ``folder`` and hold the conversation on each of its platforms; what the bot
    answered, by platform and step. Fails (AssertionError) at the first thing that does not hold."""
    async with contextlib.AsyncExitStack() as stack:
        chats = [await stack.enter_async_context(started(name)) for name in cell.platforms]
        model = await stack.enter_async_context(EchoModel()) if cell.model == "hosted" else None
        services = await stack.enter_async_context(_services(cell, folder, database_url))
        results: dict[str, dict[str, str]] = {}
        async with deployed(cell, chats, model, folder, services) as deployment:
            for chat in chats:
                results[chat.name] = await converse(chat, deployment, model, recall=cell.plugins != "new")
            if cell.browser:
                web = next(c for c in chats if isinstance(c, WebChat))
                results["browser"] = {"answer": await in_the_browser(web, folder, model)}
        return results


async def in_the_browser(web: WebChat, folder: Path, model: EchoModel | None) -> str:
    """A person opens the web chat in headless Chromium, types a message and sees the answer."""
    from selenium.webdriver.common.by import By

    from tests.web.browser import Browser

    browser = Browser(folder / "profile", folder / "screenshots")
    try:
        await browser.get(web.url)
        await browser.wait_for(
            lambda: browser.driver.find_element(By.ID, "status").get_attribute("data-state") == "ready",
            what="the page connected",
            timeout=DEADLINE,
        )
        said = marker() if model is not None else ""
        await browser.type("#text", f"Hello from a browser {said}\n".replace(" \n", "\n"))
        answers = await browser.wait_for(
            lambda: [e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".message.bot") if e.text],
            what="the answer on the page",
            timeout=DEADLINE,
        )
        await browser.screenshot("gate-web-chat")
        if model is not None:
            await browser.wait_for(
                lambda: any(said in e.text for e in browser.driver.find_elements(By.CSS_SELECTOR, ".message.bot")),
                what="the answer to the browser's message",
                timeout=DEADLINE,
            )
        return str(answers[-1])
    finally:
        browser.quit()


def cell_folder() -> Path:
    """A new folder for a cell run outside pytest (``python -m tests.gate.matrix``)."""
    return Path(tempfile.mkdtemp(prefix="gate-"))
