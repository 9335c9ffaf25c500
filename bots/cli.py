"""The ``bots`` command: run, chat, config, gateway, worker."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

from core.errors import BotError, ConfigError

from .config import check_settings, load_settings, platforms, settings_table
from .settings import Settings

__all__ = ("main",)

log = logging.getLogger("bots")


def _setup_logging(settings: Settings) -> None:
    from .logs import configure_logging

    configure_logging(settings.log)


async def _wait_for_signal() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _run(settings: Settings, *, force_chat: bool = False) -> None:
    from extensions.cli import chat

    from .app import build_agent

    chosen = [] if force_chat else platforms(settings)
    if not chosen:
        agent = build_agent(settings, platforms=["cli"])
        async with agent:
            await chat(agent, bot_name=settings.bot.name)
        return
    agent = build_agent(settings, platforms=chosen)
    log.info("starting with %s", ", ".join(chosen))
    async with agent:
        log.info("ready; press Ctrl-C to stop")
        await _wait_for_signal()
        log.info("stopping")


def _config(settings: Settings) -> int:
    rows = settings_table(settings)
    width = max(len(r[0]) for r in rows)
    for var, shown, source in rows:
        print(f"{var.ljust(width)}  {shown}  [{source}]")
    problems = check_settings(settings)
    if problems:
        print("\nproblems:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print("\nsettings OK")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bots`` console script."""
    parser = argparse.ArgumentParser(prog="bots", description="An LLM agent as a Discord and Telegram bot.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="everything in one process (terminal chat when no platform token is set)")
    sub.add_parser("chat", help="talk to the bot in the terminal")
    sub.add_parser("config", help="print the effective settings (secrets masked) and check them")
    sub.add_parser("gateway", help="platform listeners only; enqueue inputs to Redis")
    sub.add_parser("worker", help="run agents from the Redis queue and post replies")
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        if args.command == "config":
            return _config(settings)
        _setup_logging(settings)
        if args.command in ("run", "chat"):
            asyncio.run(_run(settings, force_chat=args.command == "chat"))
        elif args.command == "gateway":
            from .gateway import run_gateway

            asyncio.run(run_gateway(settings))
        elif args.command == "worker":
            from .worker import run_worker

            asyncio.run(run_worker(settings))
    except ConfigError as exc:
        print(f"bots: {exc}", file=sys.stderr)
        return 2
    except BotError as exc:
        print(f"bots: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
