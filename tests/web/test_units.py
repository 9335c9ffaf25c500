"""The pieces of the web chat and the console on their own, and the web chat's place in ``bots run``."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

from bots.console.charts import Bar, bar_chart, money, tokens
from bots.console.data import conversation_of, usage_report
from core import InMemoryUsage, ScriptedModel, create_agent
from core.usage import day_of
from core.usage.plugin import Usage
from extensions.web import Hub, WebSettings, load_secret

from .conftest import StartBot, client, csrf_of, scripted, until

ROOT = Path(__file__).resolve().parents[2]


def test_the_hub_gives_an_event_to_every_page_of_its_visitor_only() -> None:
    hub = Hub()
    with hub.listen("ann") as one, hub.listen("ann") as two, hub.listen("bob") as bob:
        assert hub.publish("ann", {"op": "post"}) == 2 and len(hub) == 3 and hub.visitors() == 2
        assert one.get_nowait() == two.get_nowait() == {"op": "post"} and bob.empty()
    assert len(hub) == 0 and hub.publish("ann", {"op": "post"}) == 0


def test_charts_escape_their_labels_and_money_reads_well() -> None:
    svg = bar_chart([Bar(label="<script>", input=10, output=5, note="$1")], title="a & b")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a &amp; b" in svg
    assert bar_chart([], title="empty").startswith("<svg")
    assert (money(0), money(0.00123), money(12.3)) == ("$0", "$0.0012", "$12.30")
    assert (tokens(999), tokens(1500), tokens(2_500_000)) == ("999", "1.5k", "2.5M")


def test_a_generated_secret_is_kept_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "data" / "web_secret"
    first = load_secret(path)
    assert load_secret(path) == first and len(first) >= 32
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_the_web_chat_counts_in_readiness_and_in_a_fleet_once_configured() -> None:
    assert not WebSettings().configured and not WebSettings().in_fleet
    assert WebSettings(port=9000).in_fleet and not WebSettings(chat_enabled=False).in_fleet


def test_conversations_are_found_back_from_their_ids() -> None:
    agent = create_agent(model=ScriptedModel(["x"]))
    found = conversation_of(agent, "telegram:chat:-100:5")
    assert found is not None and found[1].chat_id == -100 and found[1].thread_id == 5
    assert conversation_of(agent, "web:chat:abc") is not None
    assert conversation_of(agent, "telegram:chat:not-a-number") is None
    assert conversation_of(agent, "unknown:1") is None


async def test_usage_is_added_up_per_day_model_user_and_chat() -> None:
    usage = InMemoryUsage()
    today = day_of()
    keys = ["model:gpt", "user:telegram:1", "chat:telegram:chat:1"]
    await usage.add(day=today, keys=keys, input_tokens=800, output_tokens=200, cost=1500)
    await usage.add(
        day=today, keys=["model:gpt", "user:web:v", "chat:web:chat:v"], input_tokens=10, output_tokens=5, cost=0
    )
    await usage.add(
        day=today, keys=["cached:chat:telegram:chat:1", "cached:model:gpt"], input_tokens=512, output_tokens=0, cost=0
    )
    agent = create_agent(model=ScriptedModel(["x"]), plugins=[Usage(usage)])
    report = await usage_report(agent, days=7, user_limit=2000, chat_limit=0)
    assert report.total.tokens == 1015 and report.days[-1].input == 810  # (cached tokens are among the input ones)
    assert report.cached_total == 512 and report.cached == {"chat:telegram:chat:1": 512, "model:gpt": 512}
    assert [m for m, _ in report.models] == ["gpt"]
    assert [u for u, _ in report.users] == ["telegram:1", "web:v"]
    assert [(n.who, n.percent) for n in report.near_users] == [("telegram:1", 50), ("web:v", 1)]
    assert report.near_chats == []


async def test_chat_commands_and_limits_answer_in_the_web_chat(start_bot: StartBot) -> None:
    bot = await start_bot(scripted("hello"), bot={"messages_per_minute": 1})
    async with client() as visitor:
        async with visitor.get(bot.chat_url) as response:
            csrf = csrf_of(await response.text())

        async def send(text: str) -> dict[str, str]:
            headers = {"X-CSRF-Token": csrf}
            async with visitor.post(bot.chat_url + "chat/send", json={"text": text}, headers=headers) as response:
                body: dict[str, str] = await response.json()
                return body

        assert "scripted" in (await send("/settings"))["notice"]  # the model, among the chat's settings
        assert "persona" in (await send("/persona set You are terse."))["notice"].lower()
        assert "queue" in (await send("/busy queue"))["notice"]  # (a visitor's chat is theirs: they may change it)
        assert "800 ms" in (await send("/quiet 800"))["notice"]
        shown = (await send("/settings"))["notice"]
        assert "queue" in shown and "800 ms" in shown
        async with visitor.get(bot.chat_url + "chat/events") as events:
            await events.content.readuntil(b'"ready"}\n\n')
            received = bytearray()

            async def read() -> None:
                async for chunk in events.content.iter_any():
                    received.extend(chunk)

            reader = asyncio.create_task(read())
            await send("one")
            await send("two")  # over BOT_MESSAGES_PER_MINUTE: one short notice instead of an answer

            async def both_answered() -> bool:
                return received.count(b'"op":"post"') >= 2

            await until(both_answered)
            reader.cancel()
        assert b'"text":"hello"' in received and received.count(b'"text":"hello"') == 1
        assert (await send("x" * 5000))["error"].startswith("the message is longer")


def test_bots_run_prints_the_web_chat_next_to_the_terminal_chat(tmp_path: Path) -> None:
    from .conftest import _free_port

    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("WEB_", "CONSOLE_", "LLM_", "BOT_", "TELEGRAM_", "DISCORD_"))
    }
    env.update(LLM_PROVIDER="scripted", WEB_PORT=str(port), BOT_DATA_DIR=str(tmp_path / "data"), HTTP_PORT="0")
    terminal, typed = pty.openpty()  # the terminal chat opens only on a terminal
    try:
        os.write(terminal, b"/quit\n")  # (waits in the terminal until the chat reads it)
        done = subprocess.run(
            [sys.executable, "-m", "bots.cli", "run"],
            stdin=typed,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
    finally:
        os.close(terminal)
        os.close(typed)
    assert done.returncode == 0, done.stderr
    assert f"web chat: http://127.0.0.1:{port}/" in done.stdout


async def _conversations_listed(history: object) -> None:
    from core.memory import ConversationIndex, HistoryEntry

    assert isinstance(history, ConversationIndex)
    store: Any = history
    await store.append(
        "telegram:chat:1", [HistoryEntry(id="a", ts=1000, role="user", who="Ann", text="the lighthouse")]
    )
    await store.append("web:chat:v", [HistoryEntry(id="b", ts=2000, role="user", who="visitor", text="a harbour")])
    await store.append("web:chat:v", [HistoryEntry(id="c", ts=3000, role="assistant", who="assistant", text="ok")])
    everything = await history.conversations()
    assert [(c.cid, c.entries, c.last_ts) for c in everything] == [
        ("web:chat:v", 2, 3000),
        ("telegram:chat:1", 1, 1000),
    ]
    assert [c.cid for c in await history.conversations(words="LIGHTHOUSE")] == ["telegram:chat:1"]
    assert await history.conversations(words="lighthouse harbour") == []
    assert len(await history.conversations(limit=1)) == 1
    await store.close()


async def test_the_sqlite_history_lists_and_searches_conversations(tmp_path: Path) -> None:
    from core.memory import SQLiteHistory

    await _conversations_listed(SQLiteHistory(tmp_path / "history.sqlite3"))


async def test_the_postgres_history_lists_and_searches_conversations(database_url: str) -> None:
    from core.memory.postgres import PostgresHistory

    history = PostgresHistory(database_url)
    await history.start()
    await _conversations_listed(history)


class _Queue:
    """A queue in front of the agent that is unreachable once, then full."""

    distributed = True

    def __init__(self) -> None:
        self.calls = 0

    async def start(self, agent: object) -> None:
        return None

    async def submit(
        self, context: object, args: object, input_ref: object, *, dedupe_key: str | None = None
    ) -> list[object]:
        from core.errors import BackpressureError, DispatchError

        self.calls += 1
        if self.calls == 1:
            raise DispatchError("Redis is down")
        raise BackpressureError("the inbox is full", wait=0.0)

    async def stop(self) -> None:
        return None


async def test_in_front_of_a_queue_the_page_is_told_when_a_message_cannot_be_stored(tmp_path: Path) -> None:
    from extensions.web import web_extension, web_runtime

    from .conftest import WEB_SECRET, _free_port

    queue = _Queue()
    settings = WebSettings(port=_free_port(), secret=WEB_SECRET)
    agent = create_agent(model=ScriptedModel(["x"]), extensions=[web_extension(settings)], dispatcher=queue)
    await agent.start()
    try:
        runtime = web_runtime(agent)
        assert runtime is not None and runtime.address is not None
        async with client() as visitor:
            async with visitor.get(runtime.address) as response:
                csrf = csrf_of(await response.text())
            async with visitor.get(runtime.address + "chat/events") as events:
                await events.content.readuntil(b'"ready"}\n\n')
                for text in ("first", "second"):
                    headers = {"X-CSRF-Token": csrf}
                    async with visitor.post(runtime.address + "chat/send", json={"text": text}, headers=headers) as r:
                        assert r.status == 202
                    line = await events.content.readuntil(b"\n\n")
                    while b'"notice"' not in line:
                        line = await events.content.readuntil(b"\n\n")
                    assert (b"went wrong" in line) if text == "first" else (b"too many messages" in line), line
    finally:
        await agent.stop()


async def test_new_visitors_per_address_are_capped_and_known_visitors_go_on(start_bot: StartBot) -> None:
    """Clearing cookies gives a new visitor, with fresh per-user limits: one address starts at most
    WEB_NEW_VISITORS_PER_HOUR of them; a visitor with its cookie is never refused. Behind a trusted proxy on this
    machine (the web chat on loopback, as systemd runs it) the address is the one the proxy appends."""
    bot = await start_bot(scripted("hello"), web={"new_visitors_per_hour": 2, "trusted_proxies": "127.0.0.1"})

    def through_proxy(address: str) -> dict[str, str]:
        return {"X-Forwarded-For": f"6.6.6.6, {address}", "Host": "chat.example"}  # the first: the client's own

    known = client()
    try:
        async with known.get(bot.chat_url, headers=through_proxy("203.0.113.9")) as response:
            assert response.status == 200
        async with client() as fresh, fresh.get(bot.chat_url, headers=through_proxy("203.0.113.9")) as response:
            assert response.status == 200  # cookies cleared: a second new visitor
        async with client() as fresh, fresh.get(bot.chat_url, headers=through_proxy("203.0.113.9")) as response:
            assert response.status == 429 and response.headers["Retry-After"] == "600"
            assert "Too many new conversations" in await response.text()
            assert not response.cookies
        async with known.get(bot.chat_url, headers=through_proxy("203.0.113.9")) as response:
            assert response.status == 200  # its cookie: still served
        async with client() as fresh, fresh.get(bot.chat_url, headers=through_proxy("203.0.113.10")) as response:
            assert response.status == 200  # another address
        for _ in range(3):  # from this machine, nobody says for whom: not counted (every visitor would share it)
            async with client() as fresh, fresh.get(bot.chat_url) as response:
                assert response.status == 200
    finally:
        await known.close()


async def test_a_loopback_web_chat_refuses_forwarded_requests_from_untrusted_proxies(start_bot: StartBot) -> None:
    bot = await start_bot(scripted("hello"))
    async with client() as visitor:
        headers = {"X-Forwarded-For": "203.0.113.9", "Host": "chat.example"}
        async with visitor.get(bot.chat_url, headers=headers) as response:
            assert response.status == 403


def test_the_address_counted_is_the_visitor_s_when_it_is_known() -> None:
    import ipaddress

    from aiohttp.test_utils import make_mocked_request

    from extensions.web.guard import visitor_address

    proxies = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("198.51.100.1/32"))

    def address(peer: str, forwarded: str | None = None, trusted: Any = proxies) -> str | None:
        headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
        request = make_mocked_request("GET", "/", headers=headers)
        request._transport_peername = (peer, 1234)  # type: ignore[attr-defined]
        return visitor_address(request, trusted)

    assert address("8.8.8.8", "1.2.3.4") == "8.8.8.8"  # a public peer, not a proxy: its header is anybody's
    assert address("10.0.0.2", "203.0.113.9") == "203.0.113.9"
    assert address("10.0.0.2", "6.6.6.6, 203.0.113.9, 10.0.0.3") == "203.0.113.9"  # what the proxies appended
    assert address("10.0.0.2", "203.0.113.9:5123") == "203.0.113.9"  # a balancer writing the port
    assert address("10.0.0.2", "2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64"  # one subscriber's prefix
    assert address("2a00:1450:4001::1") == "2a00:1450:4001::/64"
    assert address("::ffff:8.8.4.4") == "8.8.4.4"
    # not known, not counted: a proxy that does not say for whom (public or not), a private peer (an Ingress, a
    # balancer, Docker's gateway: every visitor would share its address), this machine
    assert address("10.0.0.2") is None and address("198.51.100.1") is None
    assert address("172.17.0.1", "8.8.8.8", trusted=()) is None
    assert address("127.0.0.1") is None and address("::1") is None
