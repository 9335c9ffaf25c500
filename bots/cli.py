"""The ``bots`` command: run, chat, config, gateway, worker.

Every long-running command serves ``/healthz``, ``/readyz`` and ``/metrics`` on ``HTTP_PORT`` (when set)
and stops cleanly on SIGTERM or Ctrl-C: ``/readyz`` turns 503, inputs stop, answers in progress get
``BOT_STOP_TIMEOUT`` seconds to finish, then the process exits 0. A second signal stops at once.
A platform that fails for good while ``bots run`` runs (a service calls ``agent.fail``: Discord closing
the gateway with 4014, a token revoked) stops it the same way, then it exits with that error.
Exit codes: 0 done, 1 a failure at run time (or a shutdown that overran its bound), 2 bad settings
(also when a platform refuses them while running: a revoked token, the Message Content intent) or a data file
that cannot be used (``bots.data_check``), which a restart would not mend.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from core.errors import BotError, ConfigError
from extensions.web.settings import WebSettings

from . import knowledge, scaffold, skills_cli
from .config import check_connectivity, check_settings, load_settings, platforms
from .loading import DEFAULT_APP, load_bot
from .logs import MASK, configure_logging, secrets_of
from .settings import Settings
from .tracing import header_secrets, start_tracing
from .unknown_env import unknown_variables_warnings
from .version import version

if TYPE_CHECKING:
    from core import Agent

__all__ = (
    "COMMANDS",
    "SHUTDOWN_GRACE",
    "leaving",
    "main",
    "stop_bound",
)

log = logging.getLogger("bots")

SHUTDOWN_GRACE = 5.0
"""Seconds allowed after ``BOT_STOP_TIMEOUT`` for closing connections before a stopping process gives up."""
SAME_SIGNAL = 1.0
"""A second SIGTERM (or SIGINT) within this many seconds of the first is the same stop, not a "stop now": ``timeout``,
``kill -- -PGID`` and a group's terminal send one signal to the process and to its group, and ``make run`` puts the
bot in make's group (``timeout 60 make run`` stopped the bot at once, its answers cut). The two are sent together, but
a busy machine can handle them most of a second apart; a person who means "stop now" presses again after that."""

COMMANDS = {
    "run": "everything in one process (the terminal chat when no platform token is set, on a terminal)",
    "chat": "talk to the bot in the terminal",
    "config": "print the effective settings (secrets masked) with their source, and check them",
    "gateway": "platform listeners only; enqueue inputs to Redis",
    "worker": "run agents from the Redis queue and post replies",
    "doctor": "check the running fleet: gateways and workers alive, their versions, the backlog, dead letters",
}
"""The subcommands and their help (the deploy files and the README name only these)."""
APP_COMMANDS = ("run", "chat", "gateway", "worker")
"""The subcommands that run a bot, and so take its APP."""


def stop_bound(settings: Settings, command: str) -> float:
    """Seconds a ``command`` process may take from SIGTERM to exit: its answers' stop timeout
    (``BOT_STOP_TIMEOUT``; a worker's runs get ``REDIS_STOP_TIMEOUT``) plus ``SHUTDOWN_GRACE``."""
    timeout = settings.bot.stop_timeout
    if command in ("gateway", "worker"):
        timeout = max(timeout, settings.redis.stop_timeout)
    return timeout + SHUTDOWN_GRACE


class _Stop:
    """SIGTERM / SIGINT as events: ``first`` on the first signal, ``again`` on any later one; a SIGINT that
    ``interrupt`` takes (the terminal chat stopped the answer being written) is neither."""

    def __init__(self) -> None:
        self.first = asyncio.Event()
        self.again = asyncio.Event()
        self.interrupt: Callable[[], bool] | None = None
        """Offered each Ctrl-C first (``extensions.terminal.StopKey.press``): True when it took it."""
        self._installed: list[signal.Signals] = []
        self._first_signal: signal.Signals | None = None
        self._first_at = 0.0

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal, sig)
                self._installed.append(sig)

    def uninstall(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            loop.remove_signal_handler(sig)
        self._installed.clear()

    def _on_signal(self, sig: signal.Signals) -> None:
        if sig is signal.SIGINT and self.interrupt is not None and self.interrupt():
            log.info("SIGINT: the answer being written was stopped")
            return
        now = time.monotonic()
        if self.first.is_set():
            if sig is self._first_signal and now - self._first_at < SAME_SIGNAL:
                log.info("%s again at once (sent to the process and to its group): one stop", sig.name)
                return
            log.warning("%s again: stopping now", sig.name)
            self.again.set()
        else:
            log.info("%s: stopping (answers in progress may finish)", sig.name)
            self._first_signal, self._first_at = sig, now
            self.first.set()


class _StdinLines:
    """Lines of standard input for the terminal chat, read by a daemon thread with ``os.read``, so a
    process stopped by a signal never waits for the next line (a thread blocked in ``sys.stdin.readline``
    would keep the interpreter from exiting)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] | None = None

    def _start(self) -> asyncio.Queue[str | None]:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def put(item: str | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is reading any more
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def pump() -> None:
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            pending = ""
            try:
                fd = sys.stdin.fileno()
                while True:
                    data = os.read(fd, 65536)
                    pending += decoder.decode(data, final=not data)
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        put(line.rstrip("\r"))
                    if not data:
                        break
            except (OSError, ValueError):
                pass
            if pending:
                put(pending)
            put(None)

        threading.Thread(target=pump, name="stdin", daemon=True).start()
        return queue

    async def read_line(self) -> str | None:
        if self._queue is None:
            self._queue = self._start()
        return await self._queue.get()


async def _until_stopped(work: Coroutine[Any, Any, Any], stop: _Stop) -> bool:
    """Run ``work`` until it ends (True) or a signal comes first (False; ``work`` is cancelled)."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(stop.first.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done():
        task.result()  # raises what the work raised
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


async def _until_stopped_or_failed(
    stop: _Stop, agent: Agent, work: Coroutine[Any, Any, Any] | None = None
) -> BaseException | None:
    """Wait for the first of: a signal (None), a fatal error a service reported with ``agent.fail``
    (returned), the end of ``work`` when given (None; what it raised is raised). The rest is cancelled."""
    signalled = asyncio.ensure_future(stop.first.wait())
    failed = asyncio.ensure_future(agent.failed())
    task = asyncio.ensure_future(work) if work is not None else None
    try:
        await asyncio.wait({signalled, failed} | ({task} if task else set()), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        if task is not None:
            task.cancel()
        raise
    finally:
        signalled.cancel()
        failed.cancel()
    failure = failed.result() if failed.done() and not failed.cancelled() else None
    if task is None:
        return failure
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    elif failure is None:
        task.result()  # raises what the work raised
    elif not task.cancelled():
        task.exception()  # the service's failure is what gets reported
    return failure


async def _bounded(stopping: Awaitable[Any], *, bound: float, stop: _Stop, what: str) -> bool:
    """Await ``stopping`` for at most ``bound`` seconds (less if a second signal comes); True if it ended."""
    task = asyncio.ensure_future(stopping)
    again = asyncio.ensure_future(stop.again.wait())
    try:
        await asyncio.wait({task, again}, timeout=bound, return_when=asyncio.FIRST_COMPLETED)
    finally:
        again.cancel()
    if task.done():
        if not task.cancelled() and task.exception() is not None:
            log.error("stopping %s failed", what, exc_info=task.exception())
            return False
        return True
    if stop.again.is_set():
        log.warning("%s not stopped yet: stopping now (a second signal)", what)
    else:
        log.error(
            "%s did not stop within %.0fs (its stop timeout + %.0fs); exiting anyway",
            what,
            bound,
            SHUTDOWN_GRACE,
        )
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        async with asyncio.timeout(1.0):
            await task
    return False


@contextlib.asynccontextmanager
async def _endpoints(settings: Settings) -> AsyncIterator[None]:
    """``/healthz``, ``/readyz`` and ``/metrics`` while the block runs (nothing when ``HTTP_PORT=0``)."""
    from .ops import ops, serve

    ops.check_timeout = settings.http.check_timeout
    if not settings.http.port:
        yield
        return
    async with serve(ops, host=settings.http.host, port=settings.http.port):
        yield


async def _run(settings: Settings, *, force_chat: bool, stop: _Stop) -> int:
    from extensions.terminal import StopKey, chat

    from .app import build_agent
    from .ops import ops

    chosen = [] if force_chat else platforms(settings)
    web = (
        ["web"]
        if settings.group(WebSettings).chat_enabled and settings.group(WebSettings).port and not force_chat
        else []
    )
    terminal = force_chat or (not chosen and _on_a_terminal())
    if not (chosen or web or terminal or settings.http.port or _console_on(settings)):
        raise ConfigError(
            "no platform configured and standard input is not a terminal, so there is nothing to serve: set "
            "TELEGRAM_TOKEN or DISCORD_TOKEN, or WEB_PORT for the web chat (or run `bots chat` in a terminal)"
        )
    served = chosen + web
    agent = build_agent(
        settings, platforms=served + (["cli"] if terminal else []), stop_timeout=settings.bot.stop_timeout
    )
    ops.attach(agent)
    clean = True
    failure: BaseException | None = None
    try:
        if not await _until_stopped(_start_with_console(agent, settings), stop):
            log.info("stopped while starting")
        elif not terminal:
            if not chosen:
                log.warning(
                    "no platform configured (TELEGRAM_TOKEN, DISCORD_TOKEN) and standard input is not a terminal: "
                    "no terminal chat; serving %s until SIGTERM",
                    ", ".join(served) or "the HTTP endpoints",
                )
                _print_addresses(agent)
            log.info("ready with %s; SIGTERM or Ctrl-C stops", ", ".join(served) or "the HTTP endpoints only")
            failure = await _until_stopped_or_failed(stop, agent)
        else:
            log.info("ready: terminal chat; Ctrl-C stops an answer, Ctrl-D or /quit leaves")
            _print_addresses(agent)
            stdin = _StdinLines()
            own = settings.bot.app.strip() not in ("", DEFAULT_APP)  # a bot of the author's: its own name
            key = StopKey()  # Ctrl-C while an answer is written stops the answer, not the bot
            stop.interrupt = key.press
            name = agent.bot.name if own else settings.bot.name
            talk = chat(agent, bot_name=name, read_line=stdin.read_line, stop_key=key)
            failure = await _until_stopped_or_failed(stop, agent, talk)
        if failure is not None:
            log.info("stopping: %s failed", "a platform" if chosen else "a service")
    finally:
        ops.stopping()
        clean = await _bounded(_stop_with_console(agent), bound=stop_bound(settings, "run"), stop=stop, what="the bot")
        if clean:
            log.info("stopped")
    if failure is not None:
        raise failure  # main() prints it (secrets masked) and picks the exit code
    return 0 if clean else 1


def _on_a_terminal() -> bool:
    """Whether standard input is a terminal: the terminal chat opens only there (``bots run < /dev/null``, a
    container or a systemd unit serve the web chat and the endpoints until a signal instead)."""
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):  # closed, or replaced by something without a descriptor
        return False


def _console_on(settings: Settings) -> bool:
    secret = settings.console.secret
    return secret is not None and bool(secret.get_secret_value())


async def _start_with_console(agent: Agent, settings: Settings) -> None:
    """Start the agent, say which data it uses (``bots.data_note``), then the operator console when
    ``CONSOLE_SECRET`` is set (``bots.console``)."""
    from .data_check import check_data_files
    from .data_note import note_data

    await check_data_files(agent, settings)  # a file that cannot be used stops start-up here, naming it
    await agent.start()
    own = settings.bot.app.strip() not in ("", DEFAULT_APP)  # a bot of the author's: its own name
    await note_data(agent, settings, name=agent.bot.name if own else settings.bot.name)
    if _console_on(settings):
        from .console.server import start_console
        from .ops import ops

        await start_console(agent, settings, ops=ops)


async def _stop_with_console(agent: Agent) -> None:
    from .console.server import stop_console

    await stop_console(agent)
    await agent.stop()


def _print_addresses(agent: Agent) -> None:
    """Beside the terminal chat: where the web chat and the console are (``make run``)."""
    from extensions.web import web_runtime

    from .console.server import console_address

    web = web_runtime(agent)
    if web is not None and web.address is not None:
        print(f"web chat: {web.address}", flush=True)
    console = console_address(agent)
    if console is not None:
        print(f"console:  {console} (log in with CONSOLE_SECRET)", flush=True)


async def _queue_role(settings: Settings, command: str, stop: _Stop) -> int:
    """``bots gateway`` / ``bots worker``: the queue engineer's ``run_gateway`` / ``run_worker``, stopped
    by the first signal through ``stop`` when they take it, bounded like every other shutdown."""
    import inspect

    from .ops import ops

    if command == "gateway":
        from .gateway import run_gateway as runner
    else:
        from .worker import run_worker as runner
    takes_stop = "stop" in inspect.signature(runner).parameters
    work = asyncio.ensure_future(runner(settings, stop=stop.first) if takes_stop else runner(settings))
    waiter = asyncio.ensure_future(stop.first.wait())
    try:
        await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if work.done():
        work.result()
        return 0
    ops.stopping()
    bound = stop_bound(settings, command)
    if not takes_stop:
        work.cancel()
    return 0 if await _bounded(work, bound=bound, stop=stop, what=f"the {command}") else 1


async def _serve(settings: Settings, command: str) -> int:
    problems = await check_connectivity(settings, role=command)
    if problems:
        raise ConfigError("cannot start:\n  " + "\n  ".join(problems))
    stop = _Stop()
    stop.install()
    try:
        with start_tracing(settings.tracing, role=command):
            async with _endpoints(settings):
                if command in ("run", "chat"):
                    return await _run(settings, force_chat=command == "chat", stop=stop)
                return await _queue_role(settings, command, stop)
    finally:
        stop.uninstall()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bots`` console script."""
    parser = argparse.ArgumentParser(prog="bots", description="An LLM agent as a Discord and Telegram bot.")
    parser.add_argument("--version", action="version", version=f"bots {version()}", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if name == "config":
            command.add_argument(
                "--explain", metavar="NAME", help="print what one setting (TELEGRAM_TOKEN, BOT_APP...) does, and exit"
            )
            command.add_argument(
                "--strict", action="store_true", help="fail (exit 1) on warnings too (weak secrets, unknown variables)"
            )
            command.add_argument(
                "--changed", action="store_true", help="list only the settings whose value differs from the default"
            )
            command.add_argument("--json", action="store_true", help="print the report as JSON (secrets masked)")
        if name == "doctor":
            command.add_argument("--json", action="store_true", help="print the report as JSON")
            command.add_argument(
                "--generate-secret", action="store_true", help="print a fresh random secret (32 bytes) and exit"
            )
        if name in APP_COMMANDS:
            command.add_argument(
                "app",
                nargs="?",
                default=None,
                metavar="APP",
                help="the bot to run: a .py file, a folder holding bot.py, or a module, with an optional :attribute "
                "(default: BOT_APP, else the built-in assistant)",
            )
    scaffold.add_arguments(sub.add_parser("new", help=scaffold.HELP))
    skills_cli.add_arguments(sub.add_parser("skills", help=skills_cli.HELP))
    knowledge.add_arguments(sub.add_parser("knowledge", help=knowledge.HELP))
    args = parser.parse_args(argv)
    if args.command == "new":  # writes files only: no settings read, so a broken .env does not stop it
        return scaffold.command(args)
    secrets: list[str] = []

    def say(message: str) -> None:
        for secret in secrets:
            message = message.replace(secret, MASK)
        print(f"bots: {message}", file=sys.stderr)

    if getattr(args, "generate_secret", False):
        from .hardening import generate_secret

        print(generate_secret())
        return 0
    if getattr(args, "explain", None):  # reads no settings: works with a broken .env
        from .explain import explain

        try:
            print(explain(args.explain))
        except ConfigError as exc:
            print(f"bots: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        settings = load_settings()
        secrets = sorted({*secrets_of(settings), *header_secrets()}, key=len, reverse=True)  # the longest first
        if args.command == "skills":
            return skills_cli.command(args, settings)
        if args.command == "config":
            from .config_command import config_command

            return config_command(settings, strict=args.strict, changed=args.changed, as_json=args.json)
        if args.command == "doctor":
            from .doctor import doctor_command

            return doctor_command(settings, as_json=args.json)
        if args.command == "knowledge":
            configure_logging(settings.log, secrets=secrets)
            return knowledge.command(args, settings)
        if getattr(args, "app", None) is not None:
            settings.bot.app = args.app
        load_bot(settings.bot.app, settings)  # a mistake in the bot's file stops start-up here, naming file and line
        problems = check_settings(settings, role=args.command)
        if problems:
            raise ConfigError("invalid settings:\n  " + "\n  ".join(problems))
        terminal_chat = args.command == "chat" or (
            args.command == "run" and not platforms(settings) and _on_a_terminal()
        )
        if terminal_chat and "level" not in settings.log.model_fields_set:
            settings.log.level = "WARNING"  # keep the conversation readable; LOG_LEVEL still wins
        configure_logging(settings.log, secrets=secrets)
        for warning in unknown_variables_warnings(os.environ):
            log.warning("%s", warning)
        return asyncio.run(_serve(settings, args.command))
    except ConfigError as exc:
        say(str(exc))
        return 2
    except BotError as exc:
        say(str(exc))
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `bots config | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:  # a bug: the traceback goes through the masking log handler
        log.exception("bots %s crashed", args.command)
        return 1


def leaving() -> None:
    """Spare the interpreter's last garbage collections before the process exits: they walk every object of the
    framework and its libraries (about 0.25 s of CPU for a ``bots worker``, a quarter of what it spends to start),
    only to free memory the system takes back anyway. ``gc.freeze`` moves what lives now out of the collector's
    sight; the exit itself is unchanged (``atexit`` handlers, threads joined, modules torn down, files closed)."""
    gc.freeze()


if __name__ == "__main__":
    code = main()
    leaving()
    sys.exit(code)
