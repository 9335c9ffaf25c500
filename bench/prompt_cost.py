"""What the prompt costs (issue 51): the size of the first model request, and how much of each request is a prefix
of the one before (what a provider's prompt cache can discount), measured on the requests a fake
OpenAI-compatible server receives (tests/fakes/openai_server.py).

- the built-in assistant (``bots.app.build_agent``, its web chat, in this process) answering "hello": the first
  request's prompt (system and user messages, UTF-8) against the target of 4 KiB;
- a bot with no actions (one context, one output, ``core.create_agent``): its first request against 1.5 KiB;
- the built-in assistant over a 20-message conversation: for each request from the second on, the share of it that
  is a prefix of the request before (target: at least 90% for each);
- within one run: a bot with one action, the request that reads the action's result against the one that called it.

Prints figures; asserts nothing. Run: .venv/bin/python bench/prompt_cost.py [--messages 20]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

# bench/ off the import path (bench/core.py would stand for the project's core package);
# the repository root on it, for tests.fakes; latency's web visitor loaded from its file
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import core  # noqa: E402
from core.models.openai_compat import OpenAICompatModel  # noqa: E402
from core.models.retry import RetryPolicy  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, Reply  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_latency", Path(__file__).resolve().parent / "latency.py")
assert _spec is not None and _spec.loader is not None
_latency = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_latency)
_drain, _free_port, _visitor = _latency._drain, _latency._free_port, _latency._visitor


def prompt_of(body: dict[str, Any]) -> str:
    """The text of a chat completion request's messages, in order (what the provider reads and may cache)."""
    texts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "\n".join(texts)


def _kib(text: str) -> str:
    return f"{len(text.encode()) / 1024:.2f} KiB"


def _prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


async def assistant(messages: int) -> None:
    from bots.app import build_agent
    from bots.settings import Settings
    from extensions.web import web_runtime

    reply = Reply(chunks=('<response><output type="web:message">Hello! How can I help?</output></response>',))
    async with FakeOpenAIServer(default=reply) as server:
        with tempfile.TemporaryDirectory() as folder:
            settings = Settings(  # type: ignore[call-arg]
                _env_file=None,
                bot={"data_dir": Path(folder) / "data"},
                llm={"provider": "openai", "base_url": server.url, "api_key": "bench-key", "model": "fake"},
                web={"port": _free_port(), "secret": "web-secret-for-the-bench-0123456789abcdef"},
            )
            agent = build_agent(settings, platforms=["web"])
            await agent.start()
            try:
                runtime = web_runtime(agent)
                assert runtime is not None and runtime.address is not None
                url = runtime.address.rstrip("/") + "/"
                async with _visitor(url) as (send, events):
                    for n in range(messages):
                        before = len(server.requests)
                        await send("hello" if n == 0 else f"tell me one more thing about Redis, number {n}")
                        while (await events.get())["op"] != "post":
                            pass
                        await _drain(events)
                        assert len(server.requests) > before
            finally:
                await agent.stop()
        prompts = [prompt_of(r.body) for r in server.requests if r.path.endswith("/chat/completions")]
    first = prompts[0]
    print(f'| built-in assistant, first request ("hello") | {_kib(first)} | target at most 4 KiB |')
    shares = [_prefix(prev, cur) / max(1, len(cur)) for prev, cur in itertools.pairwise(prompts)]
    if shares:
        print(
            f"| built-in assistant, {len(prompts)} requests over {messages} messages: share of each request that is "
            f"a prefix of the one before | min {min(shares):.0%}, median {sorted(shares)[len(shares) // 2]:.0%} | "
            f"target at least 90% each; {sum(1 for s in shares if s >= 0.9)} of {len(shares)} meet it |"
        )
        print(f"| each request from the second on | {' '.join(f'{s:.0%}' for s in shares)} | |")
        print(f"| built-in assistant, last request | {_kib(prompts[-1])} | |")


async def no_actions() -> None:
    reply = Reply(chunks=('<response><output type="say">Hi!</output></response>',))
    async with FakeOpenAIServer(default=reply) as server:
        talk = core.context(type="talk", schema=str, key=lambda s: s)
        agent = core.create_agent(
            model=OpenAICompatModel(model="fake", base_url=server.url, api_key="k", retry=RetryPolicy(retries=0)),
            contexts=[talk],
            outputs=[core.output(type="say", description="A message to the user", handler=lambda d, c, a: None)],
        )
        async with agent:
            await agent.send(talk, "one", {"type": "talk:message", "data": "hello"})
        prompts = [prompt_of(r.body) for r in server.requests]
    print(f'| a bot with no actions, first request ("hello") | {_kib(prompts[0])} | target at most 1.5 KiB |')


async def within_a_run() -> None:
    call = Reply(chunks=('<response><action_call name="lookup">"mango"</action_call></response>',))
    said = Reply(chunks=('<response><output type="say">A mango is a fruit.</output></response>',))
    async with FakeOpenAIServer(replies=[call, said]) as server:
        talk = core.context(type="talk", schema=str, key=lambda s: s)
        agent = core.create_agent(
            model=OpenAICompatModel(model="fake", base_url=server.url, api_key="k", retry=RetryPolicy(retries=0)),
            contexts=[talk],
            actions=[
                core.action(name="lookup", description="Looks a word up", schema=str, handler=lambda *_: "a fruit")
            ],
            outputs=[core.output(type="say", description="A message to the user", handler=lambda d, c, a: None)],
        )
        async with agent:
            await agent.send(talk, "one", {"type": "talk:message", "data": "what is a mango?"})
        first, second = (prompt_of(r.body) for r in server.requests)
    print(
        f"| within one run: the request after an action's result, share that is a prefix of the one that called it "
        f"| {_prefix(first, second) / len(second):.0%} ({len(second) - _prefix(first, second)} bytes new of "
        f"{len(second)}) | |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("BOT_QUIET_MS", "0")
    print("| prompt | figure | |")
    print("| --- | --- | --- |")
    asyncio.run(assistant(args.messages))
    asyncio.run(no_actions())
    asyncio.run(within_a_run())


if __name__ == "__main__":
    main()
