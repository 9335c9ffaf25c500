"""What the web chat and the console refuse, over plain HTTP: no login, a wrong secret, a change without its CSRF
token, another visitor's conversation, a request that is not local when bound to loopback; and what the pages never
show (secrets, message text outside the operator's view of a conversation)."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from yarl import URL

from bots.console.auth import Sessions, same_secret
from bots.console.logouts import LocalLoginTurns
from core.memory.history import HISTORY
from extensions.web import Signer, local_only
from extensions.web.visitors import COOKIE

from .conftest import SECRET, WEB_SECRET, Bot, StartBot, client, csrf_of, login, scripted, until

SAID = "my secret plan is to visit Lisbon"
ANSWER = "Lisbon is lovely in spring."


async def _talk(bot: Bot, session: aiohttp.ClientSession, text: str) -> None:
    async with session.get(bot.chat_url) as response:
        csrf = csrf_of(await response.text())
    async with session.post(bot.chat_url + "chat/send", json={"text": text}, headers={"X-CSRF-Token": csrf}) as r:
        assert r.status == 202, await r.text()


async def _history(bot: Bot, session: aiohttp.ClientSession) -> list[str]:
    async with session.get(bot.chat_url + "chat/history") as response:
        assert response.status == 200
        return [m["text"] for m in (await response.json())["messages"]]


async def test_the_console_refuses_without_login_and_with_a_wrong_secret(start_bot: StartBot) -> None:
    bot = await start_bot(scripted(ANSWER))
    async with client() as session:
        for path in ("", "fleet", "conversations", "conversation?cid=web:chat:x", "usage", "settings"):
            async with session.get(bot.console_url + path, allow_redirects=False) as response:
                assert response.status == 303 and response.headers["Location"] == "/login", path
        for path in ("conversation/events?cid=web:chat:x",):
            async with session.get(bot.console_url + path) as response:
                assert response.status == 403
        async with session.get(bot.console_url + "healthz") as response:
            assert response.status == 200  # health is the one thing served without a login
        answers = []
        for wrong in ("", "x", SECRET[:-1], SECRET + "x", SECRET.upper()):
            async with session.post(bot.console_url + "login", data={"secret": wrong}, allow_redirects=False) as r:
                answers.append((r.status, await r.text()))
                assert "console_session" not in r.cookies
        assert len(set(answers)) == 1 and answers[0][0] == 403  # one answer, whatever was wrong
        assert SECRET not in answers[0][1]


async def test_a_change_without_its_csrf_token_is_refused(start_bot: StartBot) -> None:
    bot = await start_bot(scripted(ANSWER))
    async with client() as visitor:
        await _talk(bot, visitor, SAID)
        await until(lambda: _has_reply(bot, visitor))
    cid = (await bot.agent.provided(HISTORY).conversations())[0].cid  # type: ignore[union-attr]
    async with client() as session:
        token = await login(session, bot)
        for form in ({"cid": cid}, {"cid": cid, "csrf": "forged"}, {"cid": cid, "csrf": token[:-1]}):
            async with session.post(bot.console_url + "conversation/forget", data=form) as response:
                assert response.status == 403
        async with session.post(
            bot.console_url + "conversation/forget",
            data={"cid": cid, "csrf": token},
            headers={"Origin": "http://evil.example"},
        ) as response:
            assert response.status == 403  # another site's form, even with the token
        assert await bot.agent.provided(HISTORY).search(cid)  # type: ignore[union-attr]
        async with client() as other:  # another operator's session has its own token
            other_token = await login(other, bot)
            assert other_token != token
            async with session.post(
                bot.console_url + "conversation/forget", data={"cid": cid, "csrf": other_token}
            ) as response:
                assert response.status == 403
        async with session.post(bot.console_url + "conversation/forget", data={"cid": cid, "csrf": token}) as r:
            assert r.status == 200 and r.url.path == "/conversations"
            assert f"{cid} forgotten" in await r.text()
        forged = "Your session expired: log in again at evil.example"
        async with session.get(bot.console_url + "conversations", params={"done": forged, "mac": "x"}) as r:
            assert forged not in await r.text()  # another's link puts no words on the console's pages
        assert await bot.agent.provided(HISTORY).search(cid) == []  # type: ignore[union-attr]
    async with client() as visitor:  # the web chat's own change: a message needs the page's token
        async with visitor.get(bot.chat_url) as response:
            await response.text()
        async with visitor.post(bot.chat_url + "chat/send", json={"text": "hi"}) as response:
            assert response.status == 403
        async with visitor.post(
            bot.chat_url + "chat/send", json={"text": "hi"}, headers={"X-CSRF-Token": "forged"}
        ) as response:
            assert response.status == 403


async def _has_reply(bot: Bot, session: aiohttp.ClientSession) -> bool:
    return ANSWER in await _history(bot, session)


async def test_a_visitor_never_reaches_another_visitors_conversation(start_bot: StartBot) -> None:
    bot = await start_bot(scripted(ANSWER))
    async with client() as ann, client() as bob:
        await _talk(bot, ann, SAID)
        await until(lambda: _has_reply(bot, ann))
        async with bob.get(bot.chat_url) as response:
            await response.text()
        assert await _history(bot, bob) == []
        ann_cookie = ann.cookie_jar.filter_cookies(URL(bot.chat_url))[COOKIE].value
        ann_id = ann_cookie.split(".")[0]
        bob_cookie = bob.cookie_jar.filter_cookies(URL(bot.chat_url))[COOKIE].value
        forged = [f"{ann_id}.{bob_cookie.split('.')[1]}", f"{ann_id}.", ann_id, f"{ann_id}.AAAA", ""]
        for cookie in forged:
            async with aiohttp.ClientSession() as mallory:
                headers = {"Cookie": f"{COOKIE}={cookie}"}
                for path in ("chat/history", "chat/events"):
                    async with mallory.get(bot.chat_url + path, headers=headers) as response:
                        assert response.status == 403, (cookie, path)
                        assert SAID not in await response.text()
        # Bob's event stream never carries Ann's answer
        async with bob.get(bot.chat_url + "chat/events") as events:
            assert (await events.content.readuntil(b'"ready"}\n\n')).endswith(b'"ready"}\n\n')
            await _talk(bot, ann, "and Porto?")
            await until(lambda: _count(bot, ann, ANSWER, 2))
            await asyncio.sleep(0.1)
            seen = events.content.read_nowait()
            assert ANSWER.encode() not in seen and b"Porto" not in seen


async def _count(bot: Bot, session: aiohttp.ClientSession, text: str, count: int) -> bool:
    return (await _history(bot, session)).count(text) >= count


async def test_requests_that_are_not_local_are_refused_when_bound_to_loopback(start_bot: StartBot) -> None:
    bot = await start_bot(scripted(ANSWER))
    async with client() as session:
        for url in (bot.chat_url, bot.console_url + "login"):
            for headers in (
                {"Host": "bot.example.com"},
                {"Host": "127.0.0.1.nip.io"},
                {"X-Forwarded-For": "203.0.113.9"},
                {"X-Forwarded-For": "127.0.0.1, 198.51.100.7"},
                {"Forwarded": "for=203.0.113.9"},
            ):
                async with session.get(url, headers=headers) as response:
                    assert response.status == 403, (url, headers)
                    assert await response.text() == "Forbidden"
            async with session.get(url, headers={"Host": "localhost"}) as response:
                assert response.status == 200

    # a peer that is not on loopback (a server bound to 127.0.0.1 only ever sees loopback peers; behind a mistake
    # in the network setup it would not)
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="page")

    middleware = local_only("127.0.0.1")
    for peer, expected in ((("203.0.113.9", 4000), 403), (("127.0.0.1", 4000), 200)):
        transport = _Transport(peer)
        request = make_mocked_request("GET", "/", headers={"Host": "127.0.0.1:8766"}, transport=transport)
        response = await middleware(request, page)
        assert response.status == expected
    open_to_all = local_only("0.0.0.0")  # bound to every address on purpose: no such check
    request = make_mocked_request("GET", "/", headers={"Host": "bot.example"}, transport=_Transport(("203.0.113.9", 1)))
    assert (await open_to_all(request, page)).status == 200


class _Transport:
    def __init__(self, peer: tuple[str, int]) -> None:
        self.peer = peer

    def get_extra_info(self, name: str, default: object = None) -> object:
        return self.peer if name == "peername" else default

    def is_closing(self) -> bool:
        return False


async def test_the_pages_show_no_secret_and_no_message_outside_the_conversation_view(start_bot: StartBot) -> None:
    bot = await start_bot(scripted(ANSWER))
    async with client() as visitor:
        await _talk(bot, visitor, SAID)
        await until(lambda: _has_reply(bot, visitor))
        async with visitor.get(bot.chat_url) as response:
            page = await response.text()
        assert SAID not in page and ANSWER not in page and WEB_SECRET not in page  # the script reads the history
    cid = (await bot.agent.provided(HISTORY).conversations())[0].cid  # type: ignore[union-attr]
    async with client() as session:
        await login(session, bot)
        for path in ("fleet", "conversations", "conversations?q=lisbon", "usage", "settings"):
            async with session.get(bot.console_url + path) as response:
                html = await response.text()
                assert response.status == 200
                for secret in (SECRET, WEB_SECRET, SAID, ANSWER):
                    assert secret not in html, (path, secret)
        async with session.get(bot.console_url + "conversations?q=lisbon") as response:
            assert cid in await response.text()
        async with session.get(bot.console_url + "conversation", params={"cid": cid}) as response:
            html = await response.text()
            assert SAID in html and ANSWER in html  # the operator's own view of the conversation
            assert SECRET not in html and WEB_SECRET not in html
            assert response.headers["Cache-Control"] == "no-store"
            assert "script-src 'self'" in response.headers["Content-Security-Policy"]


async def test_secrets_are_compared_in_constant_time_and_cookies_are_signed() -> None:
    assert same_secret(SECRET, SECRET) and not same_secret(SECRET + "x", SECRET) and not same_secret("", SECRET)
    sessions = Sessions(SECRET, hours=1)
    sessions.turns = LocalLoginTurns(0.0)
    cookie = await sessions.login(SECRET)
    assert cookie is not None and await sessions.login("nope") is None
    session = await sessions.session(cookie)
    assert session is not None
    assert sessions.check_csrf(session, sessions.csrf(session)) and not sessions.check_csrf(session, None)
    assert await Sessions(SECRET + "changed", hours=1).session(cookie) is None  # a new secret logs everyone out
    sid, expires, mac = cookie.split(".")
    assert await sessions.session(f"{sid}.{int(expires) + 3600}.{mac}") is None  # a longer life cannot be forged
    expired = Sessions(SECRET, hours=1)
    expired.seconds = -10
    old = await expired.login(SECRET)
    assert old is not None and await expired.session(old) is None
    await sessions.logout(cookie)
    assert await sessions.session(cookie) is None

    signer = Signer(WEB_SECRET.encode())
    value = signer.cookie("visitor1")
    assert signer.visitor(value) == "visitor1"
    assert signer.visitor(value.replace("visitor1", "visitor2")) is None
    assert Signer(b"another-key-another-key-another-key").visitor(value) is None
    assert signer.check_csrf("visitor1", signer.csrf("visitor1")) and not signer.check_csrf(
        "visitor2", signer.csrf("visitor1")
    )


async def test_the_live_tail_keeps_going_after_an_event_with_a_lone_surrogate(start_bot: StartBot) -> None:
    """A run event may carry text that is not valid UTF-8 (half of an emoji a model streamed in two chunks, a
    tool's output): the tail sends it escaped and goes on with the next."""
    bot = await start_bot(scripted(ANSWER))
    cid = "web:chat:x"
    async with client() as session:
        await login(session, bot)
        async with session.get(bot.console_url + f"conversation/events?cid={cid}") as response:
            assert response.status == 200
            assert await response.content.readuntil(b"\n\n") == b"retry: 2000\n\n"
            assert b"watching" in await response.content.readuntil(b"\n\n")
            bot.console.tail.put(cid, {"type": "output_text", "content": "half \ud83d of it"})
            bot.console.tail.put(cid, {"type": "output_text", "content": "next"})
            first = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 5)
            second = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 5)
    assert first.startswith(b"data: ") and b"half \\ud83d of it" in first
    assert b'"next"' in second


async def test_a_host_with_junk_after_its_port_is_not_loopback() -> None:
    """Issue 49 point 6: ``Host: 127.0.0.1:80@evil`` passed the loopback guard (its port was dropped, not read)."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="page")

    middleware = local_only("127.0.0.1")
    for host, expected in (
        ("127.0.0.1:80@evil", 403),
        ("127.0.0.1:８0", 403),
        ("localhost:", 403),
        ("[::1]x", 403),
        ("[::1]:80", 200),
        ("127.0.0.1:8766", 200),
        ("localhost", 200),
    ):
        request = make_mocked_request("GET", "/", headers={"Host": host}, transport=_Transport(("127.0.0.1", 4000)))
        assert (await middleware(request, page)).status == expected, host
